# SPDX-License-Identifier: Apache-2.0

"""The pure part of the audit: grouping, capacity, driver consistency."""
import datetime

import fixtures
from oslo_config import cfg
import testtools

from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import live_state


def rp(uuid, name, root, traits=(), inv=None, used=None, reserved=0):
    return audit.ProviderView(
        uuid=uuid, name=name, root_uuid=root,
        parent_uuid=None if uuid == root else root, traits=list(traits),
        inventories={rc: {'total': t, 'reserved': reserved}
                     for rc, t in (inv or {}).items()},
        usages=dict(used or {}))


def host(name, driver, gpus=1):
    views = [rp(name, name, name)]
    for i in range(gpus):
        views.append(rp('%s-g%d' % (name, i),
                        '%s_pci_0000_%02x_00_0' % (name, 0x3b + i), name,
                        traits=['CUSTOM_GPU_MODEL_L4',
                                'CUSTOM_GPU_DRIVER_%s' % driver],
                        inv={'VGPU': 4}))
    return views


class TestAudit(testtools.TestCase):

    def test_provider_address(self):
        self.assertEqual('0000:84:00.0',
                         audit.provider_address('cmp_pci_0000_84_00_0'))
        self.assertEqual('0000:3b:00.0',
                         audit.provider_address('cmp_0000:3B:00.0'))
        self.assertEqual('0000:3b:00.0',
                         audit.provider_address('cmp_gpu_0000:3b:00.0'))
        self.assertIsNone(audit.provider_address('cmp-1'))

    def test_outliers_named_against_majority(self):
        views = (host('a', '550') + host('b', '550') + host('c', '535')
                 + host('d', '570'))
        report = audit.build_report(views)
        self.assertEqual('550', report.reference_branch)
        self.assertEqual(['c', 'd'],
                         [o['host'] for o in report.driver_outliers])
        self.assertEqual({'535': ['c'], '550': ['a', 'b'], '570': ['d']},
                         report.driver_branches)

    def test_tie_prefers_newest_branch(self):
        report = audit.build_report(host('a', '535') + host('b', '550'))
        self.assertEqual('550', report.reference_branch)
        self.assertEqual(['a'], [o['host'] for o in report.driver_outliers])

    def test_consistent_cluster(self):
        report = audit.build_report(host('a', '550', 2) + host('b', '550'))
        self.assertEqual([], report.driver_outliers)
        self.assertEqual(3, len(report.gpus))

    def test_non_gpu_children_ignored_and_pci_class_counted(self):
        views = [rp('r', 'cmp', 'r'),
                 rp('nic', 'cmp_0000:18:00.0', 'r',
                    inv={'CUSTOM_PCI_8086_1592': 1}),
                 rp('gpu', 'cmp_0000:3B:00.0', 'r',
                    inv={'CUSTOM_PCI_10DE_20B5': 1},
                    used={'CUSTOM_PCI_10DE_20B5': 1})]
        report = audit.build_report(views)
        self.assertEqual(1, len(report.gpus))
        gpu = report.gpus[0]
        self.assertEqual(('PCI_10DE_20B5', 'passthrough', 1, 0),
                         (gpu.model, gpu.mode, gpu.used, gpu.free))
        self.assertIn('no driver known for cmp', ' '.join(report.notes))

    def test_state_joins_providers_of_one_gpu(self):
        views = [rp('r', 'cmp', 'r')] + [
            rp('vf%d' % i, 'cmp_pci_0000_85_00_%d' % (i + 4), 'r',
               inv={'VGPU': 1}, used={'VGPU': i % 2}) for i in range(4)]
        payload = {'host': 'cmp', 'root_provider_uuid': 'r', 'gpus': [
            {'pci_address': '0000:85:00.0', 'model': 'A100_80GB_PCIE',
             'provider_uuids': ['vf0', 'vf1', 'vf2', 'vf3'],
             'driver_version': '550.54.15',
             'health': {'state': 'degraded', 'reasons': ['temp']}}]}
        report = audit.build_report(views, {'cmp': payload})
        self.assertEqual(1, len(report.gpus))
        gpu = report.gpus[0]
        self.assertEqual(('0000:85:00.0', 4, 2, 2, 'degraded'),
                         (gpu.address, gpu.total, gpu.used, gpu.free,
                          gpu.health))
        self.assertEqual([], report.unhealthy)

    def test_per_model_vgpu_class_counted(self):
        # [mdev_<type>] mdev_class = CUSTOM_VGPU_<MODEL> (nova-conf): a
        # pGPU provider without our traits yet is still a vGPU GPU
        views = [rp('r', 'cmp', 'r'),
                 rp('g', 'cmp_pci_0000_84_00_0', 'r',
                    inv={'CUSTOM_VGPU_A100_80GB_PCIE': 8},
                    used={'CUSTOM_VGPU_A100_80GB_PCIE': 3})]
        [gpu] = audit.build_report(views).gpus
        self.assertEqual(('A100_80GB_PCIE', 'vgpu', 8, 3, 5),
                         (gpu.model, gpu.mode, gpu.total, gpu.used,
                          gpu.free))

    def test_empty_cluster(self):
        report = audit.build_report([])
        self.assertEqual(([], []), (report.gpus, report.groups))

    def test_hosts_without_live_state_are_listed(self):
        # issue 15.1: the hosts missing_state_policy decides for
        views = host('a', '550') + host('b', '550')
        payload = {'host': 'a', 'root_provider_uuid': 'a', 'gpus': [
            {'pci_address': '0000:3b:00.0', 'provider_uuids': ['a-g0'],
             'health': {'state': 'healthy', 'reasons': []}}]}
        report = audit.build_report(views, {'a': payload})
        self.assertEqual(['b'], report.hosts_without_state)
        self.assertEqual(['b'], report.to_dict()['hosts_without_state'])
        # without any state heard, the note says so instead
        self.assertEqual([], audit.build_report(views).hosts_without_state)


NOW = datetime.datetime(2026, 12, 3, 17, 0, tzinfo=datetime.timezone.utc)


def published(views, *traits, age=datetime.timedelta(minutes=3)):
    """``views`` whose root carries the agent's host traits."""
    views[0].traits = list(traits) + [
        naming.host_reported_trait(NOW - age), 'COMPUTE_NODE']
    return views


class TestStateFromPlacement(testtools.TestCase):
    """The agents' CUSTOM_GPU_HOST_* traits: what a clouds.yaml reaches."""

    def report(self, views):
        return audit.build_report(
            views, live_state.placement_states(views, NOW))

    def test_health_driver_and_source(self):
        views = (published(host('a', '550', gpus=2),
                           naming.host_driver_trait('570.86.10'),
                           naming.gpu_health_trait('unhealthy',
                                                   '0000:3c:00.0'))
                 + host('b', '550'))
        report = self.report(views)
        self.assertEqual(
            [('a', '0000:3b:00.0', 'healthy', '570', 'placement'),
             ('a', '0000:3c:00.0', 'unhealthy', '570', 'placement'),
             ('b', '0000:3b:00.0', None, '550', None)],
            [(g.host, g.address, g.health, g.driver, g.source)
             for g in report.gpus])
        self.assertEqual(['GPU 0000:3c:00.0 unhealthy (Placement)'],
                         report.unhealthy[0].reasons)
        self.assertEqual({'a': {'source': 'placement',
                                'reported_at': '2026-12-03T16:57:00+00:00',
                                'age_s': 180.0, 'stale': False}},
                         report.state_sources)
        # the live view's lists are the live view's
        self.assertEqual(([], []), (report.hosts_with_state,
                                    report.hosts_without_state))
        self.assertEqual(['no GPU state for b: health unknown (is '
                          'gpu-nova-agent running there?).'], report.notes)

    def test_passthrough_gpus_of_one_bus_are_two_gpus(self):
        # two L4s in slots 0 and 1 of bus 0x81, the agent's mode traits,
        # no live state: two GPUs, each with its own health
        l4 = ['CUSTOM_GPU_MODEL_L4', audit.PASSTHROUGH_TRAIT]
        views = published(
            [rp('r', 'cmp', 'r')] + [
                rp('l4-%d' % i, 'cmp_0000:81:0%d.0' % i, 'r', traits=l4,
                   inv={'CUSTOM_PCI_10DE_27B8': 1},
                   used={'CUSTOM_PCI_10DE_27B8': i}) for i in (0, 1)],
            naming.host_driver_trait('570.86.10'),
            naming.gpu_health_trait('unhealthy', '0000:81:01.0'))
        report = self.report(views)
        self.assertEqual(
            [('0000:81:00.0', 0, 'healthy'),
             ('0000:81:01.0', 1, 'unhealthy')],
            [(g.address, g.used, g.health) for g in report.gpus])
        # without the mode trait the bus still joins them (VFs of a GPU)
        for v in views:
            v.traits = [t for t in v.traits if t != audit.PASSTHROUGH_TRAIT]
        self.assertEqual(1, len(self.report(views).gpus))

    def test_stale_is_said(self):
        report = self.report(published(host('a', '550'),
                                       naming.host_driver_trait('550'),
                                       age=datetime.timedelta(hours=5)))
        self.assertTrue(report.state_sources['a']['stale'])
        self.assertIn('stale GPU state in Placement for a: the agent has '
                      'not confirmed it for over 2 h', report.notes[-1])

    def test_the_bus_wins_where_configured(self):
        conf = cfg.ConfigOpts()
        conf([], default_config_files=[])
        views = published(host('a', '550'), naming.host_driver_trait('550'))
        heard = {'a': {'host': 'a', 'gpus': []}}
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states',
            lambda conf, wait: heard))
        # no transport_url (oslo.messaging's default is none of ours)
        self.assertIsNone(live_state.bus_url(conf))
        self.assertEqual('placement', live_state.gpu_states(
            conf, 10.0, views, NOW)['a']['source'])
        conf.set_override('transport_url', 'fake:/')
        self.assertEqual('fake:/', live_state.bus_url(conf))
        self.assertIs(heard, live_state.gpu_states(conf, 10.0, views, NOW))
        # no --state-wait: Placement, bus or not
        self.assertEqual('placement', live_state.gpu_states(
            conf, 0.0, views, NOW)['a']['source'])

    def test_describe(self):
        [state] = live_state.placement_states(
            published(host('a', '550'), naming.host_driver_trait('550')),
            NOW).values()
        self.assertEqual("gpu-nova-agent's traits in Placement, as of "
                         "2026-12-03T16:57:00Z (3 min old)",
                         live_state.describe(state))
        self.assertEqual('agent state', live_state.describe({'gpus': []}))
