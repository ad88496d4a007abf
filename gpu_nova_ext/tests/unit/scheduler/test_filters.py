# SPDX-License-Identifier: Apache-2.0

"""GPU filters on real Nova objects, through Nova's HostFilterHandler."""
from gpu_nova_ext.scheduler import filters as gpu_filters
from gpu_nova_ext.scheduler.filters import candidate_order
from gpu_nova_ext.scheduler.filters import facts
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

VGPU = {'resources:VGPU': '1'}


def _gpu_of(host_state):
    """PCI address index of the GPU candidate 0 draws from."""
    for rp in host_state.allocation_candidates[0]['allocations']:
        for i in range(16):
            if rp == no.rp_uuid(host_state.host, no.pci(i)):
                return i
    return None


def _cand_gpus(host_state):
    out = []
    for cand in host_state.allocation_candidates:
        for rp in cand['allocations']:
            for i in range(16):
                if rp == no.rp_uuid(host_state.host, no.pci(i)):
                    out.append(i)
    return out


class TestAllFilters(base.PluginTestCase):

    def test_stevedore_namespace(self):
        names = sorted(c.__name__ for c in gpu_filters.all_filters())
        self.assertEqual(['GpuCandidateOrderFilter', 'GpuCapabilityFilter',
                          'GpuHealthFilter', 'GpuMemoryFilter',
                          'GpuModelFilter', 'GpuPowerProfileFilter',
                          'GpuReservationFilter', 'GpuTopologyFilter'], names)
        for cls in gpu_filters.all_filters():
            self.assertFalse(cls.RUN_ON_REBUILD)


class TestModelFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('a100', [no.gpu_state('a100', 0)])
        self.add_host('a1000', [no.gpu_state('a1000', 0, model='A1000')])
        self.add_host('h100', [no.gpu_state('h100', 0,
                                            model='H100_SXM5_80GB')])
        self.add_host('mi', [no.gpu_state('mi', 0, vendor='amd',
                                          model='INSTINCT_MI210')])
        self.add_host('pt', [no.gpu_state('pt', 0, mode='passthrough')])

    def _hosts(self):
        return [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                for h in ('a100', 'a1000', 'h100', 'mi', 'pt')]

    def _passes(self, specs):
        spec = no.request_spec(dict(VGPU, **specs))
        return sorted(h.host for h in no.run_filters(
            [facts.GpuModelFilter()], self._hosts(), spec))

    def test_model_prefix_at_underscore_boundary(self):
        self.assertEqual(['a100', 'pt'], self._passes({'gpu:model': 'A100'}))
        self.assertEqual(['a1000'], self._passes({'gpu:model': 'A1000'}))
        self.assertEqual(['a100', 'pt'],
                         self._passes({'gpu:model': 'a100 80gb'}))
        self.assertEqual([], self._passes({'gpu:model': 'A100_40GB'}))

    def test_brand_word_is_optional(self):
        self.assertEqual(['mi'], self._passes({'gpu:model': 'MI210'}))
        self.assertEqual(['mi'], self._passes({'gpu:model': 'INSTINCT_MI2'
                                                            '10'}))
        self.assertEqual([], self._passes({'gpu:model': 'MI2'}))

    def test_model_list(self):
        self.assertEqual(['a100', 'h100', 'pt'],
                         self._passes({'gpu:model': 'H100, A100'}))

    def test_vendor_and_mode(self):
        self.assertEqual(['mi'], self._passes({'gpu:vendor': 'amd'}))
        self.assertEqual(['pt'], self._passes({'gpu:mode': 'passthrough'}))
        self.assertEqual(['a100', 'a1000', 'h100', 'mi'],
                         self._passes({'gpu:mode': 'vgpu'}))

    def test_vgpu_type_by_id_or_name(self):
        self.assertEqual(['a100', 'a1000', 'h100', 'mi'],
                         self._passes({'gpu:vgpu_type': 'nvidia-471'}))
        self.assertEqual(['a100', 'a1000', 'h100', 'mi'],
                         self._passes({'gpu:vgpu_type': 'A100D-10C'}))
        self.assertEqual([], self._passes({'gpu:vgpu_type': 'nvidia-999'}))

    def test_unknown_gpu_key_rejects_with_one_log_line(self):
        self.assertEqual([], self._passes({'gpu:modle': 'A100'}))
        self.assertEqual(1, len(self.log_lines('gpu:modle')))

    def test_no_model_constraint_passes_everything(self):
        self.assertEqual(5, len(self._passes({})))

    def test_info_line_counts_each_rule_when_no_host_is_left(self):
        spec = no.request_spec(dict(VGPU, **{'gpu:model': 'A100',
                                             'gpu:memory_min': '81GB'}))
        with self.assertLogs('gpu_nova_ext.scheduler', 'INFO') as logs:
            out = no.run_filters([facts.GpuModelFilter(),
                                  facts.GpuMemoryFilter()], self._hosts(),
                                 spec)
        self.assertEqual([], out)
        self.assertEqual(
            ['INFO:gpu_nova_ext.scheduler.filtering:GPU filters left no host '
             'for this request; hosts removed per rule: GpuModelFilter 3, '
             'GpuMemoryFilter 2'], logs.output)

    def test_no_info_line_while_a_host_is_left(self):
        self.assertEqual(['a100', 'pt'], self._passes({'gpu:model': 'A100'}))
        self.assertEqual([], self.log_lines('GPU filters left no host'))


class TestMemoryFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        # vGPU: 10 GiB framebuffer on an 80 GiB GPU
        self.add_host('vgpu', [no.gpu_state('vgpu', 0)])
        # passthrough: the whole 40 GiB
        self.add_host('pt', [no.gpu_state('pt', 0, mode='passthrough',
                                          memory_mib=40960)])
        # no NVML: memory unknown
        self.add_host('nonvml', [no.gpu_state('nonvml', 0,
                                              mode='passthrough',
                                              memory_mib=None)])

    def _passes(self, value):
        spec = no.request_spec(dict(VGPU, **{'gpu:memory_min': value}))
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('vgpu', 'pt', 'nonvml')]
        return sorted(h.host for h in no.run_filters(
            [facts.GpuMemoryFilter()], hosts, spec))

    def test_units(self):
        self.assertEqual(['pt', 'vgpu'], self._passes('10240'))
        self.assertEqual(['pt', 'vgpu'], self._passes('10GB'))
        self.assertEqual(['pt', 'vgpu'], self._passes('10 GiB'))
        self.assertEqual(['pt', 'vgpu'], self._passes('10240MiB'))
        self.assertEqual(['pt'], self._passes('10241MB'))
        self.assertEqual(['pt'], self._passes('40GB'))
        self.assertEqual([], self._passes('41GB'))

    def test_vgpu_framebuffer_is_the_memory(self):
        # the physical GPU has 80 GiB, the offered vGPU type 10 GiB
        self.assertNotIn('vgpu', self._passes('16GB'))

    def test_malformed_value_rejects_without_raising(self):
        self.assertEqual([], self._passes('lots'))
        lines = self.log_lines('GpuMemoryFilter rejects every host')
        self.assertEqual(1, len(lines))
        self.assertIn("gpu:memory_min='lots'", lines[0])


class TestCapabilityFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('new', [no.gpu_state('new', 0, cuda_cc='9.0',
                                           driver='550.54.15')])
        self.add_host('old', [no.gpu_state('old', 0, cuda_cc='7.5',
                                           driver='535.104.5')])
        self.add_host('patch', [no.gpu_state('patch', 0, cuda_cc='8.6',
                                             driver='550.54.3')])
        self.add_host('unknown', [no.gpu_state('unknown', 0, cuda_cc=None,
                                               driver=None)])

    def _passes(self, specs):
        spec = no.request_spec(dict(VGPU, **specs))
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('new', 'old', 'patch', 'unknown')]
        return sorted(h.host for h in no.run_filters(
            [facts.GpuCapabilityFilter()], hosts, spec))

    def test_cuda_cc(self):
        self.assertEqual(['new', 'patch'],
                         self._passes({'gpu:cuda_cc_min': '8.0'}))
        self.assertEqual(['new'], self._passes({'gpu:cuda_cc_min': '8.9'}))
        self.assertEqual(['new', 'old', 'patch'],
                         self._passes({'gpu:cuda_cc_min': '7.5'}))

    def test_driver_compared_numerically(self):
        # 550.54.15 >= 550.54.9 although "15" < "9" as strings
        self.assertEqual(['new'], self._passes({'gpu:driver_min':
                                                '550.54.9'}))
        self.assertEqual(['new', 'patch'],
                         self._passes({'gpu:driver_min': '550'}))
        self.assertEqual(['new', 'old', 'patch'],
                         self._passes({'gpu:driver_min': '535.104.5'}))

    def test_both(self):
        self.assertEqual(['new'], self._passes({
            'gpu:cuda_cc_min': '8.0', 'gpu:driver_min': '550.54.10'}))


class TestHealthFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('ok', [no.gpu_state('ok', 0)])
        self.add_host('deg', [no.gpu_state('deg', 0, health='degraded')])
        self.add_host('bad', [no.gpu_state('bad', 0, health='unhealthy')])

    def _passes(self, specs):
        spec = no.request_spec(dict(VGPU, **specs))
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('ok', 'deg', 'bad')]
        return sorted(h.host for h in no.run_filters(
            [facts.GpuHealthFilter()], hosts, spec))

    def test_default_is_healthy_only(self):
        self.assertEqual(['ok'], self._passes({}))
        self.assertEqual(['ok'], self._passes({'gpu:health': 'healthy'}))

    def test_degraded_ok(self):
        self.assertEqual(['deg', 'ok'],
                         self._passes({'gpu:health': 'degraded_ok'}))

    def test_any(self):
        self.assertEqual(['bad', 'deg', 'ok'],
                         self._passes({'gpu:health': 'any'}))

    def test_state_update_changes_the_verdict(self):
        self.assertEqual(['ok'], self._passes({}))
        self.add_host('bad', [no.gpu_state('bad', 0)],
                      generated_at=self.now + 1)
        self.assertEqual(['bad', 'ok'], self._passes({}))


class TestEachRequestSeesNewState(base.PluginTestCase):
    """Each request (RequestSpec) resolves hosts to state afresh."""

    def test_new_payload_and_staleness(self):
        self.add_host('h', [no.gpu_state('h', 0)])
        f = facts.GpuHealthFilter()

        def passes():
            host = no.host_state('h', allocation_candidates=no.candidates(
                'h', [0]))
            spec = no.request_spec(dict(VGPU, **{'gpu:health': 'healthy'}))
            return bool(no.run_filters([f], [host], spec))

        self.assertTrue(passes())
        self.add_host('h', [no.gpu_state('h', 0, health='unhealthy')],
                      generated_at=self.now + 1)
        self.assertFalse(passes())
        self.add_host('h', [no.gpu_state('h', 0)],
                      generated_at=self.now + 2)
        self.assertTrue(passes())
        self.now += 121
        self.assertFalse(passes())
        self.cache.remove('h')
        self.now -= 121
        self.assertFalse(passes())


class TestMixedHostPruning(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('mixed', [
            no.gpu_state('mixed', 0),
            no.gpu_state('mixed', 1, health='unhealthy'),
            no.gpu_state('mixed', 2, model='T4', memory_mib=15360,
                         framebuffer_mib=4096),
            no.gpu_state('mixed', 3, health='degraded')])

    def test_candidates_of_failing_gpus_are_dropped(self):
        host = no.host_state('mixed', allocation_candidates=no.candidates(
            'mixed', range(4)))
        spec = no.request_spec(dict(VGPU, **{'gpu:model': 'A100'}))
        out = no.run_filters([facts.GpuModelFilter(),
                              facts.GpuHealthFilter()], [host], spec)
        self.assertEqual([host], out)
        self.assertEqual([0], _cand_gpus(host))

    def test_degraded_ok_keeps_degraded_gpu(self):
        host = no.host_state('mixed', allocation_candidates=no.candidates(
            'mixed', range(4)))
        spec = no.request_spec(dict(VGPU, **{'gpu:health': 'degraded_ok',
                                             'gpu:memory_min': '8GB'}))
        no.run_filters([facts.GpuMemoryFilter(), facts.GpuHealthFilter()],
                       [host], spec)
        self.assertEqual([0, 3], _cand_gpus(host))

    def test_host_rejected_when_no_candidate_is_left(self):
        host = no.host_state('mixed', allocation_candidates=no.candidates(
            'mixed', [1, 2]))
        spec = no.request_spec(dict(VGPU, **{'gpu:model': 'A100'}))
        out = no.run_filters([facts.GpuModelFilter(),
                              facts.GpuHealthFilter()], [host], spec)
        self.assertEqual([], out)

    def test_candidate_without_known_gpu_judged_by_host(self):
        # legacy PCI passthrough: no GPU provider in the candidate
        host = no.host_state(
            'mixed', allocation_candidates=no.plain_candidates('mixed', 2))
        spec = no.request_spec({'gpu:model': 'A100'})
        self.assertEqual([host], no.run_filters([facts.GpuModelFilter()],
                                                [host], spec))
        spec = no.request_spec({'gpu:model': 'H100'})
        self.assertEqual([], no.run_filters([facts.GpuModelFilter()],
                                            [host], spec))


class TestMissingState(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('live', [no.gpu_state('live', 0)])

    def _run(self, filters, specs=None):
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('live', 'ghost')]
        spec = no.request_spec(dict(VGPU, **(specs or {})))
        return sorted(h.host for h in no.run_filters(filters, hosts, spec))

    def test_default_keeps_novas_behaviour_for_plain_gpu_requests(self):
        # issue 15.1: a plain resources:VGPU=1 flavor asks nothing of
        # gpu-nova-ext: a host without an agent still gets it
        filters = [facts.GpuHealthFilter(), facts.GpuModelFilter(),
                   facts.GpuMemoryFilter()]
        self.assertEqual(['ghost', 'live'], self._run(filters))
        # a gpu: constraint, or health asked for explicitly: fail closed
        self.assertEqual(['live'], self._run(filters, {'gpu:model': 'A100'}))
        self.assertEqual(['live'], self._run(filters,
                                             {'gpu:health': 'healthy'}))

    def test_fail_all_policy_rejects_host_without_state(self):
        for policy in ('fail_all', 'fail'):
            self.flags(missing_state_policy=policy, group='gpu_scheduler')
            self.assertEqual(['live'], self._run([facts.GpuHealthFilter()]))

    def test_pass_policy(self):
        self.flags(missing_state_policy='pass', group='gpu_scheduler')
        self.assertEqual(['ghost', 'live'],
                         self._run([facts.GpuHealthFilter()]))

    def test_no_hard_constraint_needs_no_state(self):
        self.assertEqual(['ghost', 'live'], self._run(
            [facts.GpuHealthFilter(), facts.GpuModelFilter()],
            {'gpu:health': 'any'}))

    def test_stale_state_counts_as_missing(self):
        self.now += 121  # default state_ttl 120 s
        healthy = {'gpu:health': 'healthy'}
        self.assertEqual([], self._run([facts.GpuHealthFilter()], healthy))
        self.add_host('live', [no.gpu_state('live', 0)],
                      generated_at=self.now)
        self.assertEqual(['live'], self._run([facts.GpuHealthFilter()],
                                             healthy))

    def test_logged_once_per_host_per_ttl(self):
        filters = [facts.GpuModelFilter(), facts.GpuHealthFilter(),
                   facts.GpuMemoryFilter()]
        specs = {'gpu:model': 'A100', 'gpu:memory_min': '1GB'}
        self._run(filters, specs)
        self._run(filters, specs)
        self.assertEqual(1, len(self.log_lines('No live GPU state for host '
                                               'ghost')))
        self.now += 60
        self.add_host('live', [no.gpu_state('live', 0)])
        self._run(filters, specs)
        self.assertEqual(1, len(self.log_lines('No live GPU state for host '
                                               'ghost')))
        self.now += 61
        self.add_host('live', [no.gpu_state('live', 0)])
        self._run(filters, specs)
        self.assertEqual(2, len(self.log_lines('No live GPU state for host '
                                               'ghost')))
        # and a debug line per rejection (four requests), from the first
        # filter that rejects
        self.assertEqual(4, len(self.log_lines(
            'GpuModelFilter: host ghost has no live GPU state')))


class TestNonGpuRequest(base.PluginTestCase):

    def test_untouched(self):
        self.add_host('h', [no.gpu_state('h', 0, health='unhealthy'),
                            no.gpu_state('h', 1)])
        cands = no.plain_candidates('h', 3)
        hosts = [no.host_state('h', allocation_candidates=cands),
                 no.host_state('ghost',
                               allocation_candidates=no.plain_candidates(
                                   'ghost'))]
        before = [list(h.allocation_candidates) for h in hosts]
        filters = [cls() for cls in gpu_filters.all_filters()]
        spec = no.request_spec({'hw:cpu_policy': 'dedicated',
                                'resources:VCPU': '2'})
        # what the cache logged while the state was added is not the
        # filters'
        logged_before = self.log.output
        out = no.run_filters(filters, hosts, spec)
        self.assertEqual(hosts, out)
        self.assertEqual(before, [h.allocation_candidates for h in hosts])
        self.assertIs(cands[0], hosts[0].allocation_candidates[0])
        self.assertEqual(logged_before, self.log.output)

    def test_custom_resource_class_is_gpu_where_it_draws_from_a_gpu(self):
        # a custom mdev class: only the candidates tell it is a GPU
        self.add_host('g', [no.gpu_state('g', 0, health='unhealthy')])
        gpu_host = no.host_state('g', allocation_candidates=no.candidates(
            'g', [0], rc='CUSTOM_NVIDIA_471'))
        nic_host = no.host_state('n', allocation_candidates=no.candidates(
            'n', [0], rc='CUSTOM_NVIDIA_471'))
        spec = no.request_spec({'resources:CUSTOM_NVIDIA_471': '1'})
        out = no.run_filters([facts.GpuHealthFilter()],
                             [gpu_host, nic_host], spec)
        self.assertEqual([nic_host], out)

    def test_rebuild_is_not_filtered(self):
        self.add_host('h', [no.gpu_state('h', 0, health='unhealthy')])
        host = no.host_state('h')
        spec = no.request_spec(VGPU, rebuild=True)
        self.assertEqual([host], no.run_filters(
            [facts.GpuHealthFilter()], [host], spec))


class TestCandidateOrder(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('h', [
            # free 1/8, hot, busy
            no.gpu_state('h', 0, available=1, temperature=80,
                         utilization=90),
            # free 8/8, coolest, idle
            no.gpu_state('h', 1, available=8, temperature=30,
                         utilization=0),
            # free 4/8, warm, half busy
            no.gpu_state('h', 2, available=4, temperature=50,
                         utilization=50),
            # least free but degraded
            no.gpu_state('h', 3, available=0, health='degraded',
                         temperature=20, utilization=0)])

    def _order(self, specs=None, gpus=range(4)):
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', gpus))
        spec = no.request_spec(dict(VGPU, **(specs or {})))
        out = no.run_filters([candidate_order.GpuCandidateOrderFilter()],
                             [host], spec)
        self.assertEqual([host], out)
        self.assertEqual(len(gpus), len(host.allocation_candidates))
        return _cand_gpus(host)

    def test_pack_is_the_default(self):
        # least free first; the rest keep Placement's order
        self.assertEqual([0, 1, 2, 3], self._order())
        self.assertEqual([0, 3, 2, 1], self._order(gpus=[3, 2, 1, 0]))

    def test_flavor_policies(self):
        for policy in ('spread', 'coolest', 'least_loaded'):
            self.assertEqual(1, self._order(
                {'gpu:intra_host_policy': policy})[0])

    def test_config_policy_and_flavor_override(self):
        self.flags(intra_host_policy='coolest', group='gpu_scheduler')
        self.assertEqual(1, self._order()[0])
        self.assertEqual(0, self._order(
            {'gpu:intra_host_policy': 'pack'})[0])

    def test_next_best_gpu_when_the_best_has_no_candidate(self):
        # pack order: 0, 2, 1, 3 (3 is degraded)
        self.assertEqual(2, self._order(gpus=[3, 1, 2])[0])
        # neither of the two best has a candidate: every candidate is
        # ranked and the list sorted
        self.assertEqual([1, 3], self._order(gpus=[3, 1]))

    def test_candidate_positions_from_earlier_requests(self):
        # the filter remembers where each GPU's candidate was on this
        # HostState; a list in another order (or shorter) is searched
        host = no.host_state('h')
        f = candidate_order.GpuCandidateOrderFilter()
        for gpus, expected in (([3, 2, 1, 0], [0, 3, 2, 1]),
                               ([3, 2, 1, 0], [0, 3, 2, 1]),
                               ([0, 1, 2, 3], [0, 1, 2, 3]),
                               ([1, 2, 3], [2, 1, 3]),
                               ([2, 1, 0, 3], [0, 2, 1, 3])):
            host.allocation_candidates = no.candidates('h', gpus)
            spec = no.request_spec(VGPU)
            self.assertEqual([host], no.run_filters([f], [host], spec))
            self.assertEqual(expected, _cand_gpus(host))

    def test_least_loaded_differs_from_coolest(self):
        self.add_host('h', [
            no.gpu_state('h', 0, temperature=30, utilization=70),
            no.gpu_state('h', 1, temperature=60, utilization=5)],
            generated_at=self.now + 1)
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', [0, 1]))
        for policy, first in (('coolest', 0), ('least_loaded', 1)):
            spec = no.request_spec(dict(VGPU, **{
                'gpu:intra_host_policy': policy}))
            no.run_filters([candidate_order.GpuCandidateOrderFilter()],
                           [host], spec)
            self.assertEqual(first, _gpu_of(host))

    def test_rejects_nothing_without_state(self):
        host = no.host_state('ghost', allocation_candidates=no.candidates(
            'ghost', [0, 1]))
        spec = no.request_spec(VGPU)
        self.assertEqual([host], no.run_filters(
            [candidate_order.GpuCandidateOrderFilter()], [host], spec))

    def test_bad_policy_rejects_with_one_log_line(self):
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', range(4)))
        spec = no.request_spec(dict(VGPU, **{
            'gpu:intra_host_policy': 'random'}))
        f = candidate_order.GpuCandidateOrderFilter()
        self.assertEqual([], no.run_filters([f], [host], spec))
        self.assertEqual([], no.run_filters([f], [host], spec))
        self.assertEqual(1, len(self.log_lines('gpu:intra_host_policy')))


class TestMisspeltNamespace(base.PluginTestCase):
    """Issue 16.5: GPU:model is not ignored."""

    def test_fails_closed_with_one_line_naming_the_fix(self):
        self.add_host('h', [no.gpu_state('h', 0, model='A100_80GB_PCIE')])
        filters = [f() for f in gpu_filters.all_filters()]
        for key in ('GPU:model', ' gpu:model'):
            host = no.host_state('h', allocation_candidates=no.candidates(
                'h', [0]))
            spec = no.request_spec(dict(VGPU, **{key: 'H100'}))
            self.assertEqual([], no.run_filters(filters, [host], spec))
            lines = self.log_lines('%s=' % key)
            self.assertEqual(1, len(lines), lines)
            self.assertIn('write gpu:model', lines[0])
