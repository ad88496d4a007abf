# SPDX-License-Identifier: Apache-2.0

"""Shared parts of the Placement functional tests: a real Placement served
over loopback HTTP, the agent's configuration pointing at it, nova-compute
shaped provider trees and GPU inventories."""
import os
import tempfile

import fixtures
from oslo_config import cfg
from oslotest import base as oslotest_base

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import base
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import reporter as preporter
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.simulate import embedded
from gpu_nova_ext.tests import privsep_fixtures

A100 = dict(vendor='nvidia', vendor_id='10de', product_id='20b5',
            model='A100_80GB_PCIE', memory_mib=81920, cuda_cc='8.0',
            driver_version='550.54.15', mig_capable=True, mig_enabled=False)
L40S = dict(vendor='nvidia', vendor_id='10de', product_id='26b9',
            model='L40S', memory_mib=46068, cuda_cc='8.9',
            driver_version='550.54.15', mig_capable=False)


def addresses(count: int, first_bus: int = 0x3b) -> list[str]:
    return ['0000:%02x:00.0' % (first_bus + i) for i in range(count)]


def make_inventory(host: str, addrs, mode: str = 'vgpu',
                   facts: dict = A100) -> base.HostInventory:
    return base.HostInventory(host=host, gpus=[
        base.Gpu(pci_address=a, mode=mode, **facts) for a in addrs])


def write_conf(directory: str, endpoint: str, host: str = 'cmp-1',
               **groups) -> str:
    """An agent configuration file; ``groups`` maps group -> {opt: val}."""
    sections = {'DEFAULT': {'host': host},
                'placement': {'auth_type': 'admin_token',
                              'endpoint': endpoint, 'token': 'admin',
                              'retry_backoff': '0.01',
                              'max_request_retries': '2'}}
    for group, opts in groups.items():
        sections.setdefault(group, {}).update(opts)
    path = os.path.join(directory, 'agent.conf')
    with open(path, 'w') as f:
        for group, opts in sections.items():
            f.write('[%s]\n' % group)
            for key, value in opts.items():
                if isinstance(value, (list, tuple)):
                    value = ','.join(value)
                f.write('%s = %s\n' % (key, value))
    return path


def load_conf(path: str) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    gconf.register_agent_opts(conf)
    conf(['--config-file', path], default_config_files=[])
    return conf


class EmbeddedPlacementFixture(fixtures.Fixture):
    def _setUp(self):
        self.placement = embedded.EmbeddedPlacement()
        self.endpoint = self.placement.start()
        self.addCleanup(self.placement.close)


class PlacementTestCase(oslotest_base.BaseTestCase):
    """A real Placement on loopback HTTP, a nova-like compute node."""

    HOST = 'cmp-1'

    def setUp(self):
        super().setUp()
        # the agent's MIG and power changes run in this process
        self.useFixture(privsep_fixtures.PrivsepFixture())
        self.placement = self.useFixture(EmbeddedPlacementFixture()).placement
        self.tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = self.make_conf()
        # nova-compute's writes go through a client of their own
        self.nova = pclient.PlacementClient(self.conf)
        self.client = pclient.PlacementClient(self.conf)

    def make_conf(self, **groups) -> cfg.ConfigOpts:
        directory = tempfile.mkdtemp(dir=self.tmp)
        return load_conf(write_conf(directory, self.placement.endpoint,
                                    self.HOST, **groups))

    def make_reporter(self, conf=None) -> preporter.Reporter:
        conf = conf or self.conf
        return preporter.Reporter(conf, pclient.PlacementClient(conf))

    def vgpu_host(self, count: int, nodename: str | None = None):
        """Root + one libvirt pGPU provider per GPU (8 vGPUs each)."""
        nodename = nodename or self.HOST
        root = compute_providers.create_compute_node(self.nova, nodename)
        pgpus = {a: compute_providers.create_pgpu_provider(
            self.nova, nodename, root, a, 8) for a in addresses(count)}
        return root, pgpus

    def pci_host(self, count: int, nodename: str | None = None,
                 first_bus: int = 0x3b):
        """Root + one PCI-in-Placement provider per GPU."""
        nodename = nodename or self.HOST
        root = compute_providers.create_compute_node(self.nova, nodename)
        pcis = {}
        for a in addresses(count, first_bus):
            pcis[a] = compute_providers.create_pci_provider(
                self.nova, nodename, root, a)
        return root, pcis

    def traits(self, uuid: str) -> set[str]:
        return set(self.client.get('/resource_providers/%s/traits'
                                   % uuid)['traits'])

    def inventories(self, uuid: str) -> dict:
        return self.client.get('/resource_providers/%s/inventories'
                               % uuid)['inventories']

    def providers(self) -> dict[str, dict]:
        return {p['name']: p for p in self.client.get(
            '/resource_providers')['resource_providers']}

    def add_traits(self, uuid: str, *traits: str) -> None:
        """Another writer adds traits (creating custom ones)."""
        for trait in traits:
            if trait.startswith('CUSTOM_'):
                self.nova.put('/traits/%s' % trait)
        cur = self.client.get('/resource_providers/%s/traits' % uuid)
        self.nova.put('/resource_providers/%s/traits' % uuid, {
            'traits': sorted(set(cur['traits']) | set(traits)),
            'resource_provider_generation':
                cur['resource_provider_generation']})
