# SPDX-License-Identifier: Apache-2.0

"""GPU weighers on real Nova objects, through Nova's HostWeightHandler."""
from nova.scheduler import weights as nova_weights

from gpu_nova_ext.scheduler.filters import candidate_order
from gpu_nova_ext.scheduler import weighers as gpu_weighers
from gpu_nova_ext.scheduler.weighers import capability
from gpu_nova_ext.scheduler.weighers import capacity
from gpu_nova_ext.scheduler.weighers import metric
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

VGPU = {'resources:VGPU': '1'}


class WeigherTestCase(base.PluginTestCase):

    def hosts(self, names, **kwargs):
        return [no.host_state(h, allocation_candidates=no.candidates(h, [0]),
                              **kwargs) for h in names]

    def ranking(self, weighers, hosts, specs=None):
        spec = no.request_spec(specs if specs is not None else VGPU)
        return [w.obj.host for w in no.weigh(weighers, hosts, spec)]


class TestAllWeighers(WeigherTestCase):

    def test_stevedore_namespace(self):
        self.assertEqual(
            ['GpuCapabilityWeigher', 'GpuEnergyWeigher',
             'GpuFragmentationWeigher', 'GpuHostAvoidanceWeigher',
             'GpuPackingWeigher', 'GpuPowerWeigher', 'GpuReservationWeigher',
             'GpuThermalWeigher', 'GpuTopologyWeigher',
             'GpuUtilizationWeigher'],
            sorted(c.__name__ for c in gpu_weighers.all_weighers()))


class TestPacking(WeigherTestCase):

    def setUp(self):
        super().setUp()
        # "busy": 2 of its 4 GPUs' vGPU capacity used; "empty": all free
        self.add_host('busy', [no.gpu_state('busy', i, available=a)
                               for i, a in enumerate((0, 0, 8, 8))])
        self.add_host('empty', [no.gpu_state('empty', i) for i in range(4)])
        self.add_host('half', [no.gpu_state('half', i, available=6)
                               for i in range(4)])

    def test_binpack_by_default(self):
        self.assertEqual(['busy', 'half', 'empty'], self.ranking(
            [capacity.GpuPackingWeigher()],
            self.hosts(['empty', 'half', 'busy'])))

    def test_spread_with_positive_multiplier(self):
        self.flags(packing_weight_multiplier=1.0, group='gpu_weights')
        self.assertEqual(['empty', 'half', 'busy'], self.ranking(
            [capacity.GpuPackingWeigher()],
            self.hosts(['busy', 'half', 'empty'])))

    def test_gpu_policy_beats_nova_spreading(self):
        # Nova's RAM/CPU/disk weighers prefer "empty" (more free RAM, CPU
        # and disk); with the default multiplier packing still decides.
        hosts = [no.host_state('busy', free_ram_mb=16384, vcpus_used=56,
                               free_disk_gb=100,
                               allocation_candidates=no.candidates(
                                   'busy', [2])),
                 no.host_state('empty', allocation_candidates=no.candidates(
                     'empty', [0]))]
        nova_only = [c() for c in nova_weights.all_weighers()]
        self.assertEqual('empty', self.ranking(nova_only, hosts)[0])
        everything = nova_only + [c() for c in gpu_weighers.all_weighers()]
        self.assertEqual('busy', self.ranking(everything, hosts)[0])

    def test_aggregate_overrides_multiplier(self):
        agg = no.aggregate('spread', ['busy', 'half', 'empty'],
                           {'packing_weight_multiplier': '5.0'})
        hosts = [no.host_state(h, aggregates=[agg],
                               allocation_candidates=no.candidates(h, [0]))
                 for h in ('busy', 'half', 'empty')]
        self.assertEqual(['empty', 'half', 'busy'], self.ranking(
            [capacity.GpuPackingWeigher()], hosts))

    def test_aggregate_override_on_some_hosts(self):
        # "empty" is in an aggregate that spreads: it wins there, while
        # the others still binpack
        agg = no.aggregate('spread', ['empty'],
                           {'packing_weight_multiplier': '10'})
        hosts = self.hosts(['busy', 'half'])
        hosts.append(no.host_state('empty', aggregates=[agg],
                                   allocation_candidates=no.candidates(
                                       'empty', [0])))
        self.assertEqual(['empty', 'busy', 'half'], self.ranking(
            [capacity.GpuPackingWeigher()], hosts))

    def test_passthrough_use_seen_in_candidates(self):
        # two hosts with two passthrough GPUs each; on "one" GPU 1 is in
        # use (Placement offers no candidate for it)
        for h in ('one', 'two'):
            self.add_host(h, [no.gpu_state(h, i, mode='passthrough')
                              for i in range(2)])
        hosts = [
            no.host_state('two', allocation_candidates=no.candidates(
                'two', [0, 1], rc='CUSTOM_GPU_A100')),
            no.host_state('one', allocation_candidates=no.candidates(
                'one', [0], rc='CUSTOM_GPU_A100'))]
        spec = {'resources:CUSTOM_GPU_A100': '1'}
        self.assertEqual('one', self.ranking(
            [capacity.GpuPackingWeigher()], hosts, spec)[0])
        raw = capacity.GpuPackingWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            no.request_spec(spec))
        self.assertEqual([1.0, 0.0], raw)

    def test_passthrough_marked_assigned(self):
        self.add_host('one', [no.gpu_state('one', 0, mode='passthrough',
                                           assigned=True),
                              no.gpu_state('one', 1, mode='passthrough',
                                           assigned=False)])
        record = self.cache.host_record('one')
        self.assertEqual(1.0, record.free_units)

    def test_unhealthy_gpus_are_no_capacity(self):
        self.add_host('sick', [no.gpu_state('sick', i, health='unhealthy')
                               for i in range(3)] + [
            no.gpu_state('sick', 3)])
        self.assertEqual('sick', self.ranking(
            [capacity.GpuPackingWeigher()],
            self.hosts(['busy', 'sick', 'half']))[0])

    def test_claim_through_two_vfs_of_one_gpu(self):
        # SR-IOV vGPU: one provider per VF; a claim of 2 vGPUs may draw
        # one from each of two VFs of the same GPU: 2 of its 4 instances
        gpu = no.gpu_state('vf', 0, available=3, max_instances=4)
        vfs = [no.rp_uuid('vf', 'vf%d' % i) for i in range(4)]
        gpu['provider_uuids'] = vfs
        self.add_host('vf', [gpu])
        root = no.rp_uuid('vf')
        claim = {'allocations': {
            root: {'resources': {'VCPU': 4}},
            vfs[0]: {'resources': {'VGPU': 1}},
            vfs[1]: {'resources': {'VGPU': 1}}}}
        host = no.host_state('vf', allocation_candidates=[claim])
        raw = capacity.GpuPackingWeigher().weigh_objects(
            [nova_weights.WeighedHost(host, 0.0)],
            no.request_spec({'resources:VGPU': '2'}))
        # 3/4 free before, 2/4 taken by the claim
        self.assertEqual([0.25], raw)
        # a claim bigger than what is free never counts below zero
        claim['allocations'][vfs[2]] = {'resources': {'VGPU': 2}}
        raw = capacity.GpuPackingWeigher().weigh_objects(
            [nova_weights.WeighedHost(host, 0.0)],
            no.request_spec({'resources:VGPU': '4'}))
        self.assertEqual([0.0], raw)

    def test_host_without_state_weighs_as_average(self):
        weigher = capacity.GpuPackingWeigher()
        hosts = self.hosts(['busy', 'ghost', 'empty'])
        spec = no.request_spec(VGPU)
        raw = weigher.weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts], spec)
        self.assertEqual((raw[0] + raw[2]) / 2, raw[1])


class TestClaimedCandidate(WeigherTestCase):
    """Weighers weigh the candidate that is first when they run."""

    def setUp(self):
        super().setUp()
        # GPU 0 busy and full, GPU 1 idle and free
        self.add_host('h', [no.gpu_state('h', 0, utilization=90, available=1),
                            no.gpu_state('h', 1, utilization=10)])
        self.add_host('other', [no.gpu_state('other', 0, utilization=50)])

    def _raw(self, host, spec):
        weigher = metric.GpuUtilizationWeigher()
        other = no.host_state('other', allocation_candidates=no.candidates(
            'other', [0]))
        return weigher.weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in (host, other)],
            spec)[0]

    def test_after_the_candidate_order_filter(self):
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', [1, 0]))
        spec = no.request_spec(VGPU)
        no.run_filters([candidate_order.GpuCandidateOrderFilter()], [host],
                       spec)
        # pack: GPU 0 (least free) first, and weighed
        self.assertAlmostEqual(0.1, self._raw(host, spec))

    def test_a_later_filter_changed_the_first_candidate(self):
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', [1, 0]))
        spec = no.request_spec(VGPU)
        no.run_filters([candidate_order.GpuCandidateOrderFilter()], [host],
                       spec)
        # a filter after it kept GPU 1's candidate only: that is weighed
        host.allocation_candidates = host.allocation_candidates[1:]
        self.assertAlmostEqual(0.9, self._raw(host, spec))


class TestMetricWeighers(WeigherTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('hot', [no.gpu_state('hot', 0, temperature=80,
                                           utilization=90, power=290)])
        self.add_host('cool', [no.gpu_state('cool', 0, temperature=35,
                                            utilization=40, power=150)])
        self.add_host('idle', [no.gpu_state('idle', 0, temperature=55,
                                            utilization=0, power=60,
                                            model='H100_SXM5_80GB')])

    def test_utilization(self):
        self.assertEqual(['idle', 'cool', 'hot'], self.ranking(
            [metric.GpuUtilizationWeigher()],
            self.hosts(['hot', 'cool', 'idle'])))

    def test_one_host_at_a_time(self):
        # Nova's BaseWeigher API: _weigh_object() on one HostState gives
        # the raw value weigh_objects() gives for it
        spec = no.request_spec(VGPU)
        for weigher, host, raw in (
                (metric.GpuUtilizationWeigher(), 'hot', 1.0 - 0.9),
                (metric.GpuThermalWeigher(), 'cool', 87 - 35),
                (metric.GpuPowerWeigher(), 'idle', None)):
            host_state = self.hosts([host])[0]
            got = weigher._weigh_object(host_state, spec)
            if raw is None:       # power: off by default, weighs nothing
                self.assertEqual(0.0, got)
            else:
                self.assertAlmostEqual(raw, got)

    def test_thermal(self):
        self.assertEqual(['cool', 'idle', 'hot'], self.ranking(
            [metric.GpuThermalWeigher()],
            self.hosts(['hot', 'idle', 'cool'])))

    def test_power_off_by_default_then_on(self):
        hosts = self.hosts(['hot', 'cool', 'idle'])
        weighed = no.weigh([metric.GpuPowerWeigher()], hosts,
                           no.request_spec(VGPU))
        self.assertEqual([0.0, 0.0, 0.0], [w.weight for w in weighed])
        self.flags(power_weight_multiplier=1.0, group='gpu_weights')
        self.assertEqual(['idle', 'cool', 'hot'], self.ranking(
            [metric.GpuPowerWeigher()], self.hosts(['hot', 'cool', 'idle'])))

    def test_capability_table_and_override(self):
        self.flags(capability_weight_multiplier=1.0, group='gpu_weights')
        self.assertEqual('idle', self.ranking(
            [capability.GpuCapabilityWeigher()],
            self.hosts(['hot', 'idle', 'cool']))[0])
        self.flags(capability_scores={'A100_80GB': '50'},
                   group='gpu_weights')
        self.assertEqual('idle', self.ranking(
            [capability.GpuCapabilityWeigher()],
            self.hosts(['hot', 'idle', 'cool']))[-1])

    def test_capability_longest_prefix(self):
        self.assertEqual(10.0, capability.score('H100_SXM5_80GB'))
        self.assertEqual(7.5, capability.score('H100_PCIE'))
        self.assertEqual(1.2, capability.score('L4'))
        self.assertEqual(3.7, capability.score('L40S'))
        self.assertIsNone(capability.score('A1000'))

    def test_weighs_the_gpu_of_the_claimed_candidate(self):
        self.add_host('two', [no.gpu_state('two', 0, utilization=95),
                              no.gpu_state('two', 1, utilization=5)])
        first = no.host_state('two', allocation_candidates=no.candidates(
            'two', [0, 1]))
        self.assertEqual('cool', self.ranking(
            [metric.GpuUtilizationWeigher()],
            [first] + self.hosts(['cool']))[0])
        second = no.host_state('two', allocation_candidates=no.candidates(
            'two', [1, 0]))
        self.assertEqual('two', self.ranking(
            [metric.GpuUtilizationWeigher()],
            [second] + self.hosts(['cool']))[0])


class TestAvoidance(WeigherTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('gpu', [no.gpu_state('gpu', i) for i in range(4)])
        self.add_host('used', [no.gpu_state('used', i, available=0)
                               for i in range(4)])

    def _plain_hosts(self):
        return [no.host_state(h, allocation_candidates=no.plain_candidates(
            h)) for h in ('gpu', 'used', 'cpu')]

    def test_non_gpu_request_avoids_idle_gpus(self):
        ranking = self.ranking([capacity.GpuHostAvoidanceWeigher()],
                               self._plain_hosts(), {})
        self.assertEqual('gpu', ranking[-1])

    def test_beats_nova_spreading_by_default(self):
        # the GPU host has the most free RAM/CPU (Nova would pick it)
        hosts = [
            no.host_state('gpu',
                          allocation_candidates=no.plain_candidates('gpu')),
            no.host_state('cpu', free_ram_mb=131072, vcpus_used=16,
                          allocation_candidates=no.plain_candidates('cpu'))]
        nova_only = [c() for c in nova_weights.all_weighers()]
        self.assertEqual('gpu', self.ranking(nova_only, hosts, {})[0])
        everything = nova_only + [c() for c in gpu_weighers.all_weighers()]
        self.assertEqual('cpu', self.ranking(everything, hosts, {})[0])

    def test_gpu_request_not_affected(self):
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('gpu', 'used')]
        weighed = no.weigh([capacity.GpuHostAvoidanceWeigher()], hosts,
                           no.request_spec(VGPU))
        self.assertEqual([0.0, 0.0], [w.weight for w in weighed])


class TestNonGpuRequestWeights(WeigherTestCase):

    def test_gpu_weighers_are_zero(self):
        self.add_host('a', [no.gpu_state('a', 0, utilization=90)])
        self.add_host('b', [no.gpu_state('b', 0, utilization=0)])
        hosts = [no.host_state(h, allocation_candidates=no.plain_candidates(
            h)) for h in ('a', 'b')]
        weighers = [c() for c in gpu_weighers.all_weighers()
                    if c is not capacity.GpuHostAvoidanceWeigher]
        weighed = no.weigh(weighers, hosts, no.request_spec({}))
        self.assertEqual([0.0, 0.0], [w.weight for w in weighed])

    def test_zero_after_a_gpu_request(self):
        # a GPU request leaves the weighers' multipliers set: a non-GPU
        # request still weighs every host 0 by them
        self.add_host('a', [no.gpu_state('a', 0, utilization=90,
                                         available=1)])
        self.add_host('b', [no.gpu_state('b', 0, utilization=0)])
        weighers = [c() for c in gpu_weighers.all_weighers()
                    if c is not capacity.GpuHostAvoidanceWeigher]
        gpu_hosts = [no.host_state(h, allocation_candidates=no.candidates(
            h, [0])) for h in ('a', 'b')]
        weighed = no.weigh(weighers, gpu_hosts, no.request_spec(VGPU))
        self.assertNotEqual(weighed[0].weight, weighed[1].weight)
        by_name = {type(w).__name__: w for w in weighers}
        self.assertEqual(2.0, by_name['GpuUtilizationWeigher'].
                         weight_multiplier(gpu_hosts[0]))
        hosts = [no.host_state(h, allocation_candidates=no.plain_candidates(
            h)) for h in ('a', 'b')]
        weighed = no.weigh(weighers, hosts, no.request_spec({}))
        self.assertEqual([0.0, 0.0], [w.weight for w in weighed])
