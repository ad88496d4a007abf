# SPDX-License-Identifier: Apache-2.0

"""Roll-out batches and the undrain check, from an audit report."""
import datetime

import testtools

from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import rollout


def gpus(host, n, model='A100_80GB_PCIE', mode='passthrough', total=1,
         driver='550.54.15'):
    return [audit.GpuView(host=host, address='0000:%02x:00.0' % (0x3b + i),
                          model=model, mode=mode, driver=driver,
                          providers=['rp-%s-%d' % (host, i)], total=total)
            for i in range(n)]


def report(*groups):
    return audit.AuditReport(
        gpus=[g for group in groups for g in group], groups=[],
        driver_branches={}, reference_branch=None, driver_outliers=[],
        unhealthy=[], reserved=[], hosts_with_state=[])


class TestPlan(testtools.TestCase):

    def test_batches_respect_the_share_of_each_pool(self):
        r = report(gpus('a', 4), gpus('b', 4), gpus('c', 2), gpus('d', 2),
                   gpus('e', 2, model='L4'), gpus('f', 2, model='L4'))
        p = rollout.plan(r, 50)
        self.assertEqual({'A100_80GB_PCIE passthrough': 6,
                          'L4 passthrough': 2}, p.allowed)
        for batch in p.batches:
            for pool, n in batch.down.items():
                self.assertLessEqual(n, p.allowed[pool], batch)
        self.assertEqual(sorted('abcdef'),
                         sorted(h for b in p.batches for h in b.hosts))
        self.assertEqual([], p.notes)

    def test_host_over_the_limit_alone_and_said(self):
        p = rollout.plan(report(gpus('big', 4), gpus('small', 1)), 25)
        self.assertEqual([['big'], ['small']], [b.hosts for b in p.batches])
        self.assertEqual(['A100_80GB_PCIE passthrough'],
                         p.batches[0].over_limit)
        self.assertIn('big alone holds 4 of 5', p.notes[0])

    def test_vgpu_capacity_counts_vgpus(self):
        r = report(gpus('a', 1, mode='vgpu', total=16),
                   gpus('b', 1, mode='vgpu', total=16),
                   gpus('c', 2, mode='vgpu', total=16))
        p = rollout.plan(r, 50)
        self.assertEqual({'A100_80GB_PCIE vgpu': 64}, p.totals)
        self.assertEqual([['c'], ['a', 'b']], [b.hosts for b in p.batches])

    def test_model_target_and_hosts_filters(self):
        r = report(gpus('a', 1), gpus('b', 1, driver='570.1'),
                   gpus('c', 1, model='L4'))
        p = rollout.plan(r, 100, model='A100', target_branch='570')
        self.assertEqual(['b'], p.done)
        self.assertEqual([['a']], [b.hosts for b in p.batches])
        p = rollout.plan(r, 100, hosts={'c'})
        self.assertEqual([['c']], [b.hosts for b in p.batches])
        p = rollout.plan(r, 100, model='H100')
        self.assertEqual([], p.batches)
        self.assertIn('no GPU host matches', p.notes[0])


class TestDriverMismatches(testtools.TestCase):

    def test_every_gpu_must_run_the_branch(self):
        r = report(gpus('a', 1, driver='570.86.10') +
                   [audit.GpuView(host='a', address='0000:5e:00.0',
                                  model='L4', mode='vgpu', driver=None)])
        self.assertEqual(['GPU 0000:5e:00.0 runs an unknown driver'],
                         rollout.driver_mismatches(r, 'a', '570'))
        self.assertEqual(['no GPU of z in Placement'],
                         rollout.driver_mismatches(r, 'z', '570'))
        self.assertEqual([], rollout.driver_mismatches(
            report(gpus('b', 2, driver='570.86.10')), 'b', '570'))


def providers(host, kind, driver_branch, addresses=('0000:3b:00.0',)):
    """Placement as audit.collect reads it.

    A root and a GPU provider per address, named as Nova names ``pgpu``
    or ``pci`` providers.
    """
    root = audit.ProviderView(uuid='root-' + host, name=host,
                              root_uuid='root-' + host)
    out = [root]
    for n, address in enumerate(addresses):
        if kind == 'pci':
            name = '%s_%s' % (host, address.upper())
            inv = {'CUSTOM_GPU_A100_80GB_PCIE': {'total': 1, 'reserved': 0}}
        else:
            name = '%s_pci_%s' % (host, address.replace(':', '_').replace(
                '.', '_'))
            inv = {'VGPU': {'total': 16, 'reserved': 0}}
        out.append(audit.ProviderView(
            uuid='rp-%s-%d' % (host, n), name=name, root_uuid=root.uuid,
            parent_uuid=root.uuid, inventories=inv,
            traits=['CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                    'CUSTOM_GPU_DRIVER_%s' % driver_branch]))
    return out


def state(host, driver, addresses=('0000:3b:00.0',)):
    return {'host': host, 'root_provider_uuid': 'root-' + host,
            'gpus': [{'pci_address': a, 'driver_version': driver,
                      'provider_uuids': ['rp-%s-%d' % (host, n)],
                      'model': 'A100_80GB_PCIE',
                      'health': {'state': 'healthy', 'reasons': []}}
                     for n, a in enumerate(addresses)]}


class TestUndrainCheck(testtools.TestCase):

    def test_all_on_the_branch(self):
        for kind in ('pgpu', 'pci'):
            check = rollout.undrain_check(
                providers('a', kind, '570'), state('a', '570.86.10'), 'a',
                '570')
            self.assertEqual(([], []), (check.problems, check.todo))

    def test_the_agent_state_is_what_the_gpu_runs(self):
        # Placement already says 570 (a drop-in regenerated too early):
        # the GPU still runs 550
        check = rollout.undrain_check(
            providers('a', 'pci', '570'), state('a', '550.54.15'), 'a',
            '570')
        self.assertEqual(['GPU 0000:3b:00.0 runs 550.54.15'], check.problems)
        self.assertIn('install driver branch 570 on a', check.todo[0])

    def test_device_spec_lags_on_pci_in_placement(self):
        check = rollout.undrain_check(
            providers('a', 'pci', '550'), state('a', '570.86.10'), 'a',
            '570')
        self.assertEqual(['Placement says GPU 0000:3b:00.0 runs 550 (a '
                          '[pci] device_spec tag)'], check.problems)
        self.assertEqual(1, len(check.todo))
        self.assertIn('regenerate the nova-conf drop-in on a', check.todo[0])
        self.assertIn('restart nova-compute', check.todo[0])

    def test_agent_trait_lags_on_vgpu_hosts(self):
        check = rollout.undrain_check(
            providers('a', 'pgpu', '550'), state('a', '570.86.10'), 'a',
            '570')
        self.assertEqual(["Placement says GPU 0000:3b:00.0 runs 550 (the "
                          "agent's trait)"], check.problems)
        self.assertIn("wait for gpu-nova-agent's next cycle on a",
                      check.todo[0])

    def test_no_state_no_gpus(self):
        check = rollout.undrain_check(providers('a', 'pci', '570'), None,
                                      'a', '570')
        self.assertIn('no GPU state that gpu-nova-agent on a published in '
                      'Placement', check.problems[0])
        self.assertIn('CUSTOM_GPU_HOST_', check.todo[0])
        check = rollout.undrain_check(providers('a', 'pci', '570'), None,
                                      'a', '570', live=True)
        self.assertIn('no live GPU state from gpu-nova-agent on a',
                      check.problems[0])
        self.assertIn("transport_url is the schedulers'", check.todo[0])
        check = rollout.undrain_check(providers('a', 'pci', '570'),
                                      state('z', '570'), 'z', '570')
        self.assertEqual(['no GPU of z in Placement'], check.problems)

    def test_vendor_vfio_vfs_provider_named_after_the_pf(self):
        # nova-compute groups a PF's VFs in one provider named after the
        # PF; the agent's state names the GPU by a VF's address
        placement = providers('a', 'pci', '550')
        gpu_state = state('a', '570.86.10', addresses=('0000:3b:00.4',))
        check = rollout.undrain_check(placement, gpu_state, 'a', '570')
        self.assertEqual(['Placement says GPU 0000:3b:00.4 runs 550 (a '
                          '[pci] device_spec tag)'], check.problems)
        self.assertIn('regenerate the nova-conf drop-in', check.todo[0])


NOW = datetime.datetime(2026, 12, 3, 17, 0, tzinfo=datetime.timezone.utc)


def published(host, kind, trait_branch, branches, unhealthy=(),
              age=datetime.timedelta(minutes=5),
              addresses=('0000:3b:00.0',)):
    """Providers whose root carries the agent's CUSTOM_GPU_HOST_* traits."""
    out = providers(host, kind, trait_branch, addresses)
    out[0].traits = sorted(
        [naming.host_driver_trait(b) for b in branches]
        + [naming.gpu_health_trait('unhealthy', a) for a in unhealthy]
        + [naming.host_reported_trait(NOW - age), 'COMPUTE_NODE'])
    return out


class TestUndrainFromPlacement(testtools.TestCase):
    """The state the agent published on the root: no message bus."""

    def check(self, placement, host='a', expected='570'):
        states = live_state.placement_states(placement, NOW)
        return rollout.undrain_check(placement, states.get(host), host,
                                     expected)

    def test_all_on_the_branch(self):
        for kind in ('pgpu', 'pci'):
            check = self.check(published('a', kind, '570', ['570']))
            self.assertEqual(([], []), (check.problems, check.todo))

    def test_the_host_traits_are_what_the_gpus_run(self):
        # the device_spec tag says 570 already, the agent read 550
        check = self.check(published('a', 'pci', '570', ['550']))
        self.assertEqual(['GPU 0000:3b:00.0 runs 550'], check.problems)
        self.assertIn('install driver branch 570 on a', check.todo[0])

    def test_the_device_spec_tag_lags(self):
        check = self.check(published('a', 'pci', '550', ['570']))
        self.assertEqual(['Placement says GPU 0000:3b:00.0 runs 550 (a '
                          '[pci] device_spec tag)'], check.problems)

    def test_several_branches_name_the_host(self):
        check = self.check(published(
            'a', 'pgpu', '570', ['550.54.15', '570'],
            addresses=('0000:3b:00.0', '0000:5e:00.0')))
        self.assertEqual(1, len(check.problems))
        self.assertTrue(check.problems[0].startswith(
            "its GPUs run driver branches 550, 570 (gpu-nova-agent's "
            "traits in Placement, as of 2026-12-03T16:55:00Z (5 min old))"),
            check.problems[0])

    def test_unknown_driver(self):
        check = self.check(published('a', 'pgpu', '570', [None]))
        self.assertEqual(['GPU 0000:3b:00.0 runs an unknown driver'],
                         check.problems)

    def test_stale_state_is_refused(self):
        check = self.check(published('a', 'pgpu', '570', ['570'],
                                     age=datetime.timedelta(hours=3)))
        self.assertEqual(1, len(check.problems))
        self.assertIn('is stale', check.problems[0])
        self.assertIn('(3 h old, stale)', check.problems[0])
        self.assertIn('check that gpu-nova-agent runs on a', check.todo[0])

    def test_no_stamp_no_state(self):
        placement = providers('a', 'pgpu', '570')
        placement[0].traits = [naming.host_driver_trait('570')]
        self.assertEqual({}, live_state.placement_states(placement, NOW))
