# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu audit`` and ``gpu rollout plan`` (python-openstackclient)
against a real Placement holding providers shaped as nova-compute and the
agent make them.

Placement is openstack-placement's own application behind its
``PlacementFixture`` (wsgi-intercept in front of ``requests``): every test
process of this suite may be monkey-patched by eventlet (Nova's harness
does it when discovery imports it), where a real HTTP server thread cannot
serve; our client still goes through keystoneauth and ``requests``.
"""
import argparse
import os
import tempfile
import threading
import time
import uuid

import fixtures
from oslo_config import cfg
from oslotest import base
from placement.tests.functional.fixtures import placement as pfixture
from requests import adapters

from gpu_nova_ext.agent import state_client
from gpu_nova_ext.cmd import common
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import base as inv_base
from gpu_nova_ext.operator import audit
from gpu_nova_ext.placement import client as placement_client
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests.functional import osc_client


def _uuid():
    return str(uuid.uuid4())


class Cluster:
    """Populates Placement as Nova 34 and the agent would."""

    def __init__(self, client):
        self.client = client
        self.uuids = {}

    def call(self, method, path, body=None):
        return self.client.request(method, path, body, version='1.39')

    def provider(self, name, parent=None, inventory=None, traits=(),
                 reserved=0):
        rp = _uuid()
        body = {'name': name, 'uuid': rp}
        if parent:
            body['parent_provider_uuid'] = self.uuids[parent]
        self.call('POST', '/resource_providers', body)
        self.uuids[name] = rp
        gen = 0
        if inventory:
            for rc in inventory:
                if rc.startswith('CUSTOM_'):
                    self.call('PUT', '/resource_classes/%s' % rc)
            gen = self.call('PUT', '/resource_providers/%s/inventories' % rp,
                            {'resource_provider_generation': gen,
                             'inventories': {
                                 rc: {'total': total, 'reserved': reserved}
                                 for rc, total in inventory.items()}}
                            )['resource_provider_generation']
        if traits:
            for t in traits:
                if t.startswith('CUSTOM_'):
                    self.call('PUT', '/traits/%s' % t)
            self.call('PUT', '/resource_providers/%s/traits' % rp,
                      {'resource_provider_generation': gen,
                       'traits': list(traits)})
        return rp

    def allocate(self, name, rc, amount):
        self.call('PUT', '/allocations/%s' % _uuid(), {
            'allocations': {self.uuids[name]: {'resources': {rc: amount}}},
            'project_id': _uuid(), 'user_id': _uuid(),
            'consumer_generation': None, 'consumer_type': 'INSTANCE'})


def gpu_traits(model, driver, mode):
    return ['CUSTOM_GPU_VENDOR_NVIDIA', 'CUSTOM_GPU_MODEL_%s' % model,
            'CUSTOM_GPU_DRIVER_%s' % driver, 'CUSTOM_GPU_MODE_%s' % mode]


class TestAuditAgainstPlacement(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        # as Nova's harness does for wsgi-intercept
        self.useFixture(fixtures.MonkeyPatch(
            'keystoneauth1.session.TCPKeepAliveAdapter.init_poolmanager',
            adapters.HTTPAdapter.init_poolmanager))
        endpoint = self.useFixture(pfixture.PlacementFixture()).endpoint
        with tempfile.NamedTemporaryFile('w', suffix='.conf',
                                         delete=False) as f:
            # the Placement app logs in this process: keep stdout JSON
            f.write('[DEFAULT]\nuse_stderr = true\n'
                    'transport_url = fake://\n'
                    '[placement]\nauth_type = admin_token\n'
                    'endpoint = %s\ntoken = admin\n' % endpoint)
        self.addCleanup(os.unlink, f.name)
        self.conf_file = f.name
        args = argparse.Namespace(config_file=[self.conf_file],
                                  config_dir=[], debug=False)
        self.conf = common.load_config(args, 'test')
        c = self.cluster = Cluster(placement_client.PlacementClient(
            self.conf))
        for host in ('cmp-1', 'cmp-2', 'cmp-3', 'cmp-4'):
            c.provider(host, inventory={'VCPU': 64, 'MEMORY_MB': 262144},
                       traits=['CUSTOM_GPU_HOST'])
        # cmp-1: two T4 vGPU parents (libvirt pGPU providers), driver 535
        for addr in ('0000_84_00_0', '0000_85_00_0'):
            c.provider('cmp-1_pci_%s' % addr, parent='cmp-1',
                       inventory={'VGPU': 16},
                       traits=gpu_traits('T4', '535', 'VGPU'))
        c.allocate('cmp-1_pci_0000_84_00_0', 'VGPU', 3)
        # cmp-1 also has a NIC in PCI-in-Placement: not a GPU
        c.provider('cmp-1_0000:18:00.0', parent='cmp-1',
                   inventory={'CUSTOM_PCI_8086_1592': 1},
                   traits=['COMPUTE_MANAGED_PCI_DEVICE'])
        # cmp-2: two A100 passthrough in PCI-in-Placement, driver 550
        for addr in ('0000:3B:00.0', '0000:3C:00.0'):
            c.provider('cmp-2_%s' % addr, parent='cmp-2',
                       inventory={'CUSTOM_GPU_A100_80GB_PCIE': 1},
                       traits=['COMPUTE_MANAGED_PCI_DEVICE'] + gpu_traits(
                           'A100_80GB_PCIE', '550', 'PASSTHROUGH'))
        c.allocate('cmp-2_0000:3B:00.0', 'CUSTOM_GPU_A100_80GB_PCIE', 1)
        # cmp-3: the agent's inventory mode, GPU reserved, driver 550
        c.provider('cmp-3_gpu_0000:3b:00.0', parent='cmp-3',
                   inventory={'CUSTOM_GPU_A100_80GB_PCIE': 1}, reserved=1,
                   traits=['CUSTOM_GPU_OWNER_GPU_NOVA_EXT'] + gpu_traits(
                       'A100_80GB_PCIE', '550', 'PASSTHROUGH'))
        # cmp-4: an A100 with one pGPU provider per SR-IOV VF, driver 550
        for addr in ('0000_86_00_4', '0000_86_00_5', '0000_86_01_0'):
            c.provider('cmp-4_pci_%s' % addr, parent='cmp-4',
                       inventory={'VGPU': 1},
                       traits=gpu_traits('A100_80GB_PCIE', '550', 'VGPU'))
        c.allocate('cmp-4_pci_0000_86_00_5', 'VGPU', 1)

        self.useFixture(osc_client.Cloud(endpoint))

    def test_json_from_placement(self):
        data = osc_client.openstack_json(self, 'gpu', 'audit')
        groups = {(g['host'], g['model'], g['mode']): g
                  for g in data['groups']}
        self.assertEqual(
            {('cmp-1', 'T4', 'vgpu'), ('cmp-2', 'A100_80GB_PCIE',
                                       'passthrough'),
             ('cmp-3', 'A100_80GB_PCIE', 'passthrough'),
             ('cmp-4', 'A100_80GB_PCIE', 'vgpu')}, set(groups))
        t4 = groups[('cmp-1', 'T4', 'vgpu')]
        self.assertEqual((2, 32, 3, 29),
                         (t4['gpus'], t4['total'], t4['used'], t4['free']))
        a100 = groups[('cmp-2', 'A100_80GB_PCIE', 'passthrough')]
        self.assertEqual((2, 2, 1, 1), (a100['gpus'], a100['total'],
                                        a100['used'], a100['free']))
        # three VF providers are one physical GPU
        vf = groups[('cmp-4', 'A100_80GB_PCIE', 'vgpu')]
        self.assertEqual((1, 3, 1, 2), (vf['gpus'], vf['total'], vf['used'],
                                        vf['free']))
        self.assertEqual('550', data['drivers']['reference'])
        self.assertEqual([{'host': 'cmp-1', 'branches': ['535'],
                           'expected': '550'}], data['drivers']['outliers'])
        self.assertEqual(['cmp-3'], [g['host'] for g in data['reserved']])
        self.assertEqual('0000:3b:00.0', data['reserved'][0]['address'])
        self.assertEqual([], data['unhealthy'])

    def test_table(self):
        rc, out, err = osc_client.openstack('gpu', 'audit')
        self.assertEqual(0, rc, err)
        self.assertIn("branches.535='['cmp-1']'", out)
        self.assertIn("'expected': '550'", out)
        self.assertIn("free='1', gpus='2', host='cmp-2', "
                      "mode='passthrough', model='A100_80GB_PCIE'", out)
        self.assertIn('no live GPU state', out)

    def test_rollout_plan(self):
        plan = osc_client.openstack_json(
            self, 'gpu', 'rollout', 'plan', '--max-unavailable', '50%',
            '--target-driver', '550')
        self.assertEqual(['cmp-1'], [h for b in plan['batches']
                                     for h in b['hosts']])
        self.assertEqual(['cmp-2', 'cmp-3', 'cmp-4'], plan['done'])
        rc, out, err = osc_client.openstack(
            'gpu', 'rollout', 'plan', '--max-unavailable', '0')
        self.assertEqual(2, rc)
        self.assertIn('--max-unavailable 0', err)

    def test_health_from_state(self):
        providers = audit.collect(placement_client.PlacementClient(
            self.conf))
        uuids = self.cluster.uuids
        state = {'version': '1.0', 'host': 'cmp-2',
                 'root_provider_uuid': uuids['cmp-2'], 'gpus': [
                     {'pci_address': '0000:3c:00.0', 'model':
                      'A100_80GB_PCIE', 'driver_version': '550.54.15',
                      'provider_uuids': [uuids['cmp-2_0000:3C:00.0']],
                      'health': {'state': 'unhealthy',
                                 'reasons': ['xid 79: GPU fell off the bus']}
                      }]}
        report = audit.build_report(providers, {'cmp-2': state})
        self.assertEqual(1, len(report.unhealthy))
        bad = report.unhealthy[0]
        self.assertEqual(('cmp-2', '0000:3c:00.0', '550.54.15'),
                         (bad.host, bad.address, bad.driver))
        grp = [g for g in report.groups if g['host'] == 'cmp-2'][0]
        self.assertEqual(1, grp['unhealthy'])
        self.assertEqual(['cmp-2'], report.hosts_with_state)

    def test_cli_hears_agent_state(self):
        # An agent on the same (in-process fake://) bus answers the audit's
        # resend request with its state, as a real agent answers a
        # scheduler that starts.
        self.addCleanup(state_cache.reset_cache)
        uuids = self.cluster.uuids
        gpu = inv_base.Gpu(
            pci_address='0000:3c:00.0', vendor='nvidia',
            model='A100_80GB_PCIE', memory_mib=81920,
            driver_version='550.54.15', mode='passthrough',
            provider_uuids=[uuids['cmp-2_0000:3C:00.0']],
            health=inv_base.Health('unhealthy', ['xid 79']))
        payload = {'version': '1.0', 'host': 'cmp-2', 'nodename': 'cmp-2',
                   'generated_at': time.time(), 'agent_mode': 'annotate',
                   'root_provider_uuid': uuids['cmp-2'],
                   'gpus': [gpu.to_state()]}
        aconf = cfg.ConfigOpts()
        gconf.register_agent_opts(aconf)
        aconf(['--config-file', self.conf_file], default_config_files=[],
              default_config_dirs=[])
        sent = threading.Event()

        def on_resend():
            def cast():
                agent.cast_state(payload)
                sent.set()
            threading.Thread(target=cast, daemon=True).start()

        agent = state_client.AgentStateClient(aconf, on_resend)
        agent.start()
        self.addCleanup(agent.stop)
        data = osc_client.openstack_json(
            self, 'gpu', 'audit', '--state-wait', '1.5', '--config-file',
            self.conf_file)
        self.assertTrue(sent.is_set())
        self.assertEqual(['cmp-2'], data['hosts_with_state'])
        self.assertEqual([('cmp-2', '0000:3c:00.0', ['xid 79'])],
                         [(g['host'], g['address'], g['reasons'])
                          for g in data['unhealthy']])
