# SPDX-License-Identifier: Apache-2.0

"""The reporter against a real Placement served over loopback HTTP.

Write requests are counted at the server (a WSGI middleware in front of
Placement), not in the client.
"""
import datetime
import uuid

import fixtures

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests.functional.placement import base

MODEL_TRAIT = 'CUSTOM_GPU_MODEL_A100_80GB_PCIE'


class TestAnnotate(base.PlacementTestCase):

    def test_first_report_then_steady_cycle_writes_nothing(self):
        root, pgpus = self.vgpu_host(8)
        inv = base.make_inventory(self.HOST, list(pgpus))
        reporter = self.make_reporter()

        self.placement.reset_counters()
        result = reporter.report(inv)
        first_writes = self.placement.writes
        # 10 custom traits created once (the root's host driver branch
        # and reported stamp among them), the root and 8 pGPU providers
        self.assertEqual(19, first_writes, self.placement.write_log)
        self.assertEqual(first_writes, result.writes)
        self.assertEqual(root, result.root_provider_uuid)
        self.assertEqual(self.HOST, result.nodename)
        self.assertIn(naming.HOST_TRAIT, self.traits(root))
        self.assertIn(naming.host_driver_trait('550'), self.traits(root))
        for addr, rp in pgpus.items():
            traits = self.traits(rp)
            self.assertIn(MODEL_TRAIT, traits)
            self.assertIn('CUSTOM_GPU_MODE_VGPU', traits)
            self.assertIn('CUSTOM_GPU_MEMORY_80GB', traits)
            self.assertIn('CUSTOM_GPU_CUDA_CC_8_0', traits)
            self.assertIn('CUSTOM_GPU_DRIVER_550', traits)
            self.assertIn('OWNER_NOVA', traits)
            self.assertEqual([rp], inv.gpu(addr).provider_uuids)
        # the root does not describe GPUs Nova already reports
        self.assertNotIn(MODEL_TRAIT, self.traits(root))

        self.placement.reset_counters()
        again = reporter.report(base.make_inventory(self.HOST, list(pgpus)))
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        self.assertEqual([], again.changes)
        self.assertEqual(0, again.writes)
        # a fresh agent (restart) also writes nothing
        self.placement.reset_counters()
        self.make_reporter().report(base.make_inventory(self.HOST,
                                                        list(pgpus)))
        self.assertEqual(0, self.placement.writes, self.placement.write_log)

    def test_pci_providers_get_no_traits_but_their_uuids_are_recorded(self):
        root, pcis = self.pci_host(2)
        before = {rp: self.traits(rp) for rp in pcis.values()}
        inv = base.make_inventory(self.HOST, list(pcis), mode='passthrough')
        self.placement.reset_counters()
        self.make_reporter().report(inv)
        for addr, rp in pcis.items():
            self.assertEqual(before[rp], self.traits(rp))
            self.assertEqual([rp], inv.gpu(addr).provider_uuids)
            self.assertNotIn(
                '/resource_providers/%s/traits' % rp,
                ' '.join(self.placement.write_log))
        # the root: the host trait and the host's GPU state
        ours = {t for t in self.traits(root) if naming.is_ours(t)}
        self.assertEqual({naming.HOST_TRAIT, naming.host_driver_trait('550')},
                         {t for t in ours if not naming.host_reported_at(t)})
        self.assertEqual(1, len([t for t in ours
                                 if naming.host_reported_at(t)]), ours)
        names = self.providers()
        self.assertIn('cmp-1_0000:3B:00.0', names)

    def test_legacy_passthrough_gpus_describe_the_root(self):
        root = compute_providers.create_compute_node(self.nova, self.HOST)
        inv = base.make_inventory(self.HOST, base.addresses(2),
                                  mode='passthrough')
        self.make_reporter().report(inv)
        traits = self.traits(root)
        self.assertIn(MODEL_TRAIT, traits)
        self.assertIn('CUSTOM_GPU_MODE_PASSTHROUGH', traits)
        self.assertEqual([], inv.gpus[0].provider_uuids)

    def test_vf_pgpu_providers_are_all_annotated(self):
        root = compute_providers.create_compute_node(self.nova, self.HOST)
        vfs = ['0000:3b:00.4', '0000:3b:00.5']
        rps = [compute_providers.create_pgpu_provider(
            self.nova, self.HOST, root, vf, 1) for vf in vfs]
        inv = base.make_inventory(self.HOST, ['0000:3b:00.0'])
        inv.gpus[0].vfs = vfs
        self.make_reporter().report(inv)
        for rp in rps:
            self.assertIn(MODEL_TRAIT, self.traits(rp))
        self.assertEqual(rps, inv.gpus[0].provider_uuids)

    def test_model_change_and_foreign_traits(self):
        root, pgpus = self.vgpu_host(2)
        addr, rp = next(iter(pgpus.items()))
        self.add_traits(rp, 'CUSTOM_OPERATOR_TAG', 'HW_CPU_X86_AVX2')
        self.add_traits(root, 'CUSTOM_RACK_7')
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, list(pgpus)))

        inv = base.make_inventory(self.HOST, list(pgpus), facts=base.L40S)
        self.placement.reset_counters()
        result = reporter.report(inv)
        traits = self.traits(rp)
        self.assertIn('CUSTOM_GPU_MODEL_L40S', traits)
        self.assertNotIn(MODEL_TRAIT, traits)
        self.assertNotIn('CUSTOM_GPU_MIG_CAPABLE', traits)
        self.assertIn('CUSTOM_GPU_MEMORY_48GB', traits)
        # traits outside our prefix are never removed
        for kept in ('CUSTOM_OPERATOR_TAG', 'HW_CPU_X86_AVX2', 'OWNER_NOVA'):
            self.assertIn(kept, traits)
        self.assertIn('CUSTOM_RACK_7', self.traits(root))
        self.assertIn('COMPUTE_NODE', self.traits(root))
        # new traits (model, memory, cc) + the 2 pGPU providers
        self.assertEqual(5, self.placement.writes, self.placement.write_log)
        self.assertTrue(any('-' + MODEL_TRAIT in c for c in result.changes))

    def test_vanished_gpu_loses_our_traits_only(self):
        root, pgpus = self.vgpu_host(2)
        (a1, rp1), (a2, rp2) = pgpus.items()
        self.add_traits(rp2, 'CUSTOM_OPERATOR_TAG')
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, [a1, a2]))
        reporter.report(base.make_inventory(self.HOST, [a1]))
        self.assertEqual({'OWNER_NOVA', 'CUSTOM_OPERATOR_TAG'},
                         self.traits(rp2))
        self.assertIn(MODEL_TRAIT, self.traits(rp1))
        reporter.report(base.make_inventory(self.HOST, []))
        self.assertNotIn(naming.HOST_TRAIT, self.traits(root))

    def test_dry_run_writes_nothing(self):
        root, pgpus = self.vgpu_host(2)
        self.placement.reset_counters()
        result = self.make_reporter().report(
            base.make_inventory(self.HOST, list(pgpus)), dry_run=True)
        self.assertEqual(0, self.placement.writes)
        self.assertEqual(3, len(result.changes), result.changes)
        self.assertTrue(result.dry_run)

    def test_compute_node_found_by_fqdn_and_missing(self):
        reporter = self.make_reporter()
        self.assertRaises(exception.ComputeNodeNotFound, reporter.report,
                          base.make_inventory(self.HOST, []))
        root = compute_providers.create_compute_node(self.nova,
                                                     'cmp-1.example.org')
        result = reporter.report(base.make_inventory(self.HOST, []))
        self.assertEqual(root, result.root_provider_uuid)
        self.assertEqual('cmp-1.example.org', result.nodename)

    def test_compute_node_recreated(self):
        root, pgpus = self.vgpu_host(1)
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, list(pgpus)))
        for rp in list(pgpus.values()) + [root]:
            self.nova.delete('/resource_providers/%s' % rp)
        root2, pgpus2 = self.vgpu_host(1)
        result = reporter.report(base.make_inventory(self.HOST,
                                                     list(pgpus2)))
        self.assertEqual(root2, result.root_provider_uuid)
        self.assertIn(MODEL_TRAIT, self.traits(list(pgpus2.values())[0]))


class TestConcurrencyAndFailures(base.PlacementTestCase):

    def test_concurrent_writer_keeps_its_traits(self):
        root, pgpus = self.vgpu_host(3)
        targets = list(pgpus.values())
        conflicts = []
        foreign = {}

        def other_writer(environ):
            # Before each of our trait writes lands, another writer bumps
            # the generation and adds a trait of its own (twice per
            # provider at most, so we converge after retrying).
            path = environ['PATH_INFO']
            if environ['REQUEST_METHOD'] != 'PUT' or not path.endswith(
                    '/traits'):
                return None
            rp = path.split('/')[2]
            if rp not in targets or foreign.get(rp, 0) >= 2:
                return None
            foreign[rp] = foreign.get(rp, 0) + 1
            trait = 'CUSTOM_OTHER_%d' % foreign[rp]
            self.placement.direct_request('PUT', '/traits/%s' % trait)
            cur = self.placement.direct_request(
                'GET', '/resource_providers/%s/traits' % rp).body
            resp = self.placement.direct_request(
                'PUT', '/resource_providers/%s/traits' % rp, {
                    'traits': cur['traits'] + [trait],
                    'resource_provider_generation':
                        cur['resource_provider_generation']})
            self.assertEqual(200, resp.status)
            conflicts.append(rp)
            return None

        self.placement.hooks.append(other_writer)
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, list(pgpus)))
        self.assertEqual(6, len(conflicts))
        for rp in targets:
            traits = self.traits(rp)
            self.assertIn(MODEL_TRAIT, traits)
            self.assertIn('CUSTOM_OTHER_1', traits)
            self.assertIn('CUSTOM_OTHER_2', traits)
        # converged: the next cycle writes nothing
        self.placement.hooks.clear()
        self.placement.reset_counters()
        reporter.report(base.make_inventory(self.HOST, list(pgpus)))
        self.assertEqual(0, self.placement.writes, self.placement.write_log)

    def test_endless_conflicts_skip_the_provider_not_the_cycle(self):
        root, pgpus = self.vgpu_host(2)
        rp_bad, rp_good = pgpus.values()
        rp_bad_name = [p['name'] for p in self.providers().values()
                       if p['uuid'] == rp_bad][0]

        def always_conflict(environ):
            if (environ['REQUEST_METHOD'] == 'PUT' and
                    rp_bad in environ['PATH_INFO']):
                return ('409 Conflict', {'errors': [{
                    'status': 409, 'title': 'Conflict',
                    'code': 'placement.concurrent_update',
                    'detail': 'resource provider generation conflict'}]})
            return None

        self.placement.hooks.append(always_conflict)
        self.placement.reset_counters()
        result = self.make_reporter().report(
            base.make_inventory(self.HOST, list(pgpus)))
        self.assertIn(MODEL_TRAIT, self.traits(rp_good))
        self.assertNotIn(MODEL_TRAIT, self.traits(rp_bad))
        # said as not applied, with the reason, and not as a change made
        self.assertEqual([], result.skipped)
        self.assertEqual(1, len(result.not_applied), result.not_applied)
        self.assertIn('traits +', result.not_applied[0])
        self.assertIn('409', result.not_applied[0])
        self.assertFalse(any(rp_bad_name in c for c in result.changes),
                         result.changes)
        # 1 try + [placement] max_conflict_retries (5)
        puts = [w for w in self.placement.write_log if rp_bad in w]
        self.assertEqual(6, len(puts))

    def test_placement_down_then_back(self):
        root, pgpus = self.vgpu_host(2)
        reporter = self.make_reporter()
        self.placement.stop()
        self.assertRaises(exception.PlacementUnavailable, reporter.report,
                          base.make_inventory(self.HOST, list(pgpus)))
        self.placement.start()
        result = reporter.report(base.make_inventory(self.HOST, list(pgpus)))
        self.assertEqual(3, len(result.changes))
        for rp in pgpus.values():
            self.assertIn(MODEL_TRAIT, self.traits(rp))

    def test_5xx_is_retried_with_backoff(self):
        root, pgpus = self.vgpu_host(1)
        failures = [2]

        def flaky(environ):
            if failures[0] > 0:
                failures[0] -= 1
                return ('503 Service Unavailable', 'upstream gone')
            return None

        self.placement.hooks.append(flaky)
        result = self.make_reporter().report(
            base.make_inventory(self.HOST, list(pgpus)))
        self.assertEqual(0, failures[0])
        self.assertEqual(2, len(result.changes))

    def test_undocumented_answer_skips_that_provider(self):
        root, pgpus = self.vgpu_host(2)
        rp_bad, rp_good = pgpus.values()
        logger = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext.placement.reporter'))

        def garbage(environ):
            if (environ['REQUEST_METHOD'] == 'GET' and
                    environ['PATH_INFO'] ==
                    '/resource_providers/%s/traits' % rp_bad):
                return ('200 OK', {'trait_list': 'nope'})
            return None

        self.placement.hooks.append(garbage)
        inv = base.make_inventory(self.HOST, list(pgpus))
        result = self.make_reporter().report(inv)
        self.placement.hooks.clear()
        self.assertIn(MODEL_TRAIT, self.traits(rp_good))
        self.assertNotIn(MODEL_TRAIT, self.traits(rp_bad))
        self.assertEqual(1, len(result.skipped))
        self.assertIn('request id req-', logger.output)
        self.assertIn('trait_list', logger.output)
        # the provider's UUID is still known for the state payload, and
        # its GPU is not mistaken for one without a provider
        self.assertEqual([rp_bad], inv.gpus[0].provider_uuids)
        self.assertNotIn(MODEL_TRAIT, self.traits(root))


class TestInventoryMode(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.conf = self.make_conf(agent={
            'mode': 'inventory', 'reserved_gpus': '0000:3d:00.0'})
        self.root = compute_providers.create_compute_node(self.nova, self.HOST)

    def own(self, addr):
        return self.providers().get(naming.own_provider_name(self.HOST,
                                                             addr))

    def test_own_providers_reserved_and_steady(self):
        inv = base.make_inventory(self.HOST, base.addresses(3),
                                  mode='passthrough')
        inv.gpus[1].health.state = 'unhealthy'
        reporter = self.make_reporter()
        # one clock: the root's reported stamp does not turn a minute
        now = datetime.datetime.now(datetime.timezone.utc)
        reporter.now = lambda: now
        self.placement.reset_counters()
        result = reporter.report(inv)
        rc = 'CUSTOM_GPU_A100_80GB_PCIE'
        for gpu, reserved in zip(inv.gpus, (0, 1, 1)):
            rp = self.own(gpu.pci_address)
            self.assertIsNotNone(rp, gpu.pci_address)
            self.assertEqual(self.root, rp['parent_provider_uuid'])
            self.assertEqual([rp['uuid']], gpu.provider_uuids)
            inv_ = self.inventories(rp['uuid'])
            self.assertEqual({rc}, set(inv_))
            self.assertEqual(1, inv_[rc]['total'])
            self.assertEqual(reserved, inv_[rc]['reserved'])
            traits = self.traits(rp['uuid'])
            self.assertIn(naming.OWNER_TRAIT, traits)
            self.assertIn('CUSTOM_GPU_MODE_PASSTHROUGH', traits)
            self.assertIn(MODEL_TRAIT, traits)
        self.assertEqual(self.placement.writes, result.writes)
        # steady
        self.placement.reset_counters()
        reporter.report(base.make_inventory(self.HOST, base.addresses(3),
                                            mode='passthrough'))
        # health back: the inventory and the root's health traits
        self.assertEqual(2, self.placement.writes, self.placement.write_log)
        self.assertFalse([t for t in self.traits(self.root)
                          if naming.gpu_health(t)])
        self.placement.reset_counters()
        reporter.report(base.make_inventory(self.HOST, base.addresses(3),
                                            mode='passthrough'))
        self.assertEqual(0, self.placement.writes, self.placement.write_log)

    def test_vanished_gpu_with_and_without_allocations(self):
        a1, a2 = base.addresses(2)
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, [a1, a2],
                                            mode='passthrough'))
        rp2 = self.own(a2)['uuid']
        consumer = str(uuid.uuid4())
        compute_providers.claim(self.nova, consumer,
                                {rp2: {'CUSTOM_GPU_A100_80GB_PCIE': 1}})
        result = reporter.report(base.make_inventory(self.HOST, [a1, a2][:0],
                                                     mode='passthrough'))
        # a1: no allocations -> deleted; a2: allocated -> reserved + warned
        self.assertIsNone(self.own(a1))
        self.assertIsNotNone(self.own(a2))
        inv = self.inventories(rp2)['CUSTOM_GPU_A100_80GB_PCIE']
        self.assertEqual(1, inv['reserved'])
        self.assertTrue(any(a2 in w and 'allocations' in w
                            for w in result.warnings), result.warnings)
        self.placement.reset_counters()
        reporter.report(base.make_inventory(self.HOST, [],
                                            mode='passthrough'))
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        compute_providers.unclaim(self.nova, consumer)
        reporter.report(base.make_inventory(self.HOST, [],
                                            mode='passthrough'))
        self.assertIsNone(self.own(a2))

    def test_model_change_under_allocation(self):
        a1, = base.addresses(1)
        reporter = self.make_reporter()
        reporter.report(base.make_inventory(self.HOST, [a1],
                                            mode='passthrough'))
        rp = self.own(a1)['uuid']
        consumer = str(uuid.uuid4())
        compute_providers.claim(self.nova, consumer,
                                {rp: {'CUSTOM_GPU_A100_80GB_PCIE': 1}})
        reporter.report(base.make_inventory(self.HOST, [a1],
                                            mode='passthrough',
                                            facts=base.L40S))
        invs = self.inventories(rp)
        self.assertEqual(1, invs['CUSTOM_GPU_A100_80GB_PCIE']['reserved'])
        self.assertEqual(1, invs['CUSTOM_GPU_L40S']['reserved'])
        self.assertIn('CUSTOM_GPU_MODEL_L40S', self.traits(rp))
        compute_providers.unclaim(self.nova, consumer)
        reporter.report(base.make_inventory(self.HOST, [a1],
                                            mode='passthrough',
                                            facts=base.L40S))
        invs = self.inventories(rp)
        self.assertEqual({'CUSTOM_GPU_L40S'}, set(invs))
        self.assertEqual(0, invs['CUSTOM_GPU_L40S']['reserved'])

    def test_gpus_nova_reports_get_no_own_provider(self):
        a1, a2 = base.addresses(2)
        compute_providers.create_pci_provider(self.nova, self.HOST,
                                              self.root, a1)
        self.make_reporter().report(base.make_inventory(
            self.HOST, [a1, a2], mode='passthrough'))
        self.assertIsNone(self.own(a1))
        self.assertIsNotNone(self.own(a2))
