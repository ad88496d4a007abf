# SPDX-License-Identifier: Apache-2.0


"""The fragmentation-aware policy on real Nova objects: the request mix,
GpuFragmentationWeigher, the ``fragmentation`` intra-host policy and the
candidate-limit warning."""
import collections
import random

import fixtures
from nova.scheduler import weights as nova_weights

from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler.filters import candidate_order
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.scheduler.weighers import capacity
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

RC = 'CUSTOM_GPU_A100'


def _claim(host: str, gpu_indexes, vcpus: int = 4) -> dict:
    """One allocation candidate drawing one passthrough GPU each."""
    root = no.rp_uuid(host)
    allocations = {root: {'resources': {'VCPU': vcpus, 'MEMORY_MB': 8192}}}
    for i in gpu_indexes:
        allocations[no.rp_uuid(host, no.pci(i))] = {'resources': {RC: 1}}
    return {'allocations': allocations, 'mappings': {}}


def _mix(*entries) -> fragmentation.Mix:
    return fragmentation.make_mix(
        (fragmentation.Shape(float(g), float(c), float(r)), w)
        for g, c, r, w in entries)


class TestFragmentation(base.PluginTestCase):
    """The measure itself."""

    def test_whole_gpu_shapes(self):
        mix = _mix((1, 4, 8192, 1), (8, 4, 8192, 1))
        # 8 free GPUs: every shape fits, nothing is stranded
        self.assertEqual(0.0, fragmentation.fragmentation(
            [1.0] * 8, 64, 262144, mix))
        # 7 free: the 8-GPU shape (half of the mix) cannot use them
        self.assertEqual(3.5, fragmentation.fragmentation(
            [0.0] + [1.0] * 7, 64, 262144, mix))

    def test_cpu_and_ram_beside_the_gpus(self):
        mix = _mix((1, 16, 8192, 1))
        self.assertEqual(0.0, fragmentation.fragmentation(
            [1.0, 1.0], 32, 16384, mix))
        # too few vCPUs, or too little RAM: both GPUs are stranded
        self.assertEqual(2.0, fragmentation.fragmentation(
            [1.0, 1.0], 15, 16384, mix))
        self.assertEqual(2.0, fragmentation.fragmentation(
            [1.0, 1.0], 32, 8191, mix))

    def test_gpus_the_cpu_and_ram_cannot_feed(self):
        # every shape fits, but 24 vCPUs feed 1.5 GPUs of 16-vCPU servers:
        # half a GPU is expected to be stranded; RAM likewise
        mix = _mix((1, 16, 8192, 1))
        self.assertEqual(0.5, fragmentation.fragmentation(
            [1.0, 1.0], 24, 16384, mix))
        self.assertEqual(1.0, fragmentation.fragmentation(
            [1.0, 1.0], 32, 8192, mix))
        # the mix's need per GPU: a 1-GPU server of 4 vCPUs and a 2-GPU
        # one of 16, as often: (4 + 16) / (1 + 2) vCPUs per GPU; 20 vCPUs
        # feed 3 of 8 free GPUs
        mix = _mix((1, 4, 1024, 1), (2, 16, 1024, 1))
        self.assertAlmostEqual(5.0, fragmentation.fragmentation(
            [1.0] * 8, 20, 262144, mix), places=9)
        # a host whose large servers took its CPU strands its last GPUs:
        # the same free GPUs weigh worse with less CPU beside them
        self.assertGreater(
            fragmentation.fragmentation([1.0] * 4, 20, 262144, mix),
            fragmentation.fragmentation([1.0] * 4, 40, 262144, mix))

    def test_partial_gpu_shapes(self):
        # a half-GPU vGPU shape cannot use a GPU with a quarter left;
        # a whole-GPU shape cannot use either partly used GPU
        free = [0.25, 0.5, 1.0]
        self.assertEqual(0.25, fragmentation.fragmentation(
            free, 64, 262144, _mix((0.5, 1, 1024, 1))))
        self.assertEqual(0.75, fragmentation.fragmentation(
            free, 64, 262144, _mix((1, 1, 1024, 1))))

    def test_empty_mix_and_no_free_gpu(self):
        self.assertEqual(0.0, fragmentation.fragmentation(
            [1.0], 64, 1024, fragmentation.EMPTY))
        self.assertEqual(0.0, fragmentation.fragmentation(
            [0.0, 0.0], 0, 0, _mix((1, 4, 8192, 1))))


def _by_definition(free, vcpus, ram_mb, mix, domains=None):
    """A host's fragmentation straight from its definition.

    Shape by shape (design doc: Fragmentation-aware placement): a
    whole-GPU shape needs as many whole GPUs, in one link domain where a
    domain of the host is that large (a GPU without a domain is one of
    its own; no domains at all: one domain of every GPU).
    """
    def domain(i):
        return 'host' if domains is None else (domains[i] or i)
    largest = max(collections.Counter(
        domain(i) for i in range(len(free))).values())
    intact = max(collections.Counter(
        domain(i) for i, f in enumerate(free)
        if f >= 1.0 - 1e-6).values(), default=0)
    free = [f for f in free if f > 0]
    total = sum(free)
    whole = sum(1 for f in free if f >= 1.0 - 1e-6)
    out = 0.0
    for shape in mix.whole + mix.part:
        if shape.vcpus > vcpus or shape.ram_mb > ram_mb:
            out += shape.prob * total
        elif shape.units >= 1.0 - 1e-6:
            needs = intact if shape.units <= largest else whole
            out += shape.prob * (total if shape.units > needs + 1e-9
                                 else total - whole)
        else:
            out += shape.prob * sum(f for f in free
                                    if f < shape.units - 1e-9)
    if total <= 0:
        return out
    units = sum(s.prob * s.units for s in mix.whole + mix.part)
    fed = min(vcpus * units / sum(s.prob * s.vcpus
                                  for s in mix.whole + mix.part),
              ram_mb * units / sum(s.prob * s.ram_mb
                                   for s in mix.whole + mix.part))
    unfed = total - max(0.0, min(total, fed))
    # the two losses as independent shares of the free capacity
    return total * (1 - (1 - out / total) * (1 - unfed / total))


def _fed_share(free, vcpus, ram_mb, mix):
    """The share of the free units the host's CPU and RAM feed."""
    total = sum(f for f in free if f > 0)
    if total <= 0:
        return 1.0
    units = sum(s.prob * s.units for s in mix.whole + mix.part)
    fed = min(vcpus * units / sum(s.prob * s.vcpus
                                  for s in mix.whole + mix.part),
              ram_mb * units / sum(s.prob * s.ram_mb
                                   for s in mix.whole + mix.part))
    return max(0.0, min(total, fed)) / total


class TestFragmentationSums(base.PluginTestCase):
    """The suffix sums against the definition, on seeded random hosts."""

    def _cases(self, count=300):
        rng = random.Random(36)
        for _ in range(count):
            shapes = [(rng.choice([0.125, 0.25, 0.5, 1, 2, 4, 8]),
                       rng.choice([2, 4, 16, 32]),
                       rng.choice([2048, 8192, 65536]),
                       rng.randint(1, 9)) for _ in range(rng.randint(1, 8))]
            # eighths: the free capacity of 1/8 vGPUs; whole GPUs half
            # the time, so that link domains have whole GPUs to break
            free = [rng.choice([1.0, rng.randint(0, 8) / 8])
                    for _ in range(rng.randint(1, 8))]
            # no links, or NVLink pairs / islands with GPUs outside any
            domains = rng.choice([None, tuple(
                rng.choice([None, 'nvl-a', 'nvl-b', 'nvl-c'])
                for _ in free)])
            yield (_mix(*shapes), free, rng.choice([1, 8, 24, 64]),
                   rng.choice([4096, 32768, 262144]), domains)

    def test_fragmentation_is_its_definition(self):
        for mix, free, vcpus, ram, domains in self._cases():
            self.assertAlmostEqual(
                _by_definition(free, vcpus, ram, mix, domains),
                fragmentation.fragmentation(free, vcpus, ram, mix, domains),
                places=9, msg='%s free=%s domains=%s' % (mix, free, domains))

    def test_a_broken_link_domain_is_lost_to_larger_shapes(self):
        # 4 whole GPUs free, as one NVLink island or as two broken halves:
        # a 4-GPU shape can use the island only
        mix = _mix((4, 4, 8192, 1))
        free = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
        island = ('a',) * 4 + ('b',) * 4
        broken = ('a', 'a', 'b', 'b', 'a', 'a', 'b', 'b')
        self.assertEqual(0.0, fragmentation.fragmentation(
            free, 64, 262144, mix, island))
        self.assertEqual(4.0, fragmentation.fragmentation(
            free, 64, 262144, mix, broken))
        # without links the host's four whole GPUs serve it
        self.assertEqual(0.0, fragmentation.fragmentation(
            free, 64, 262144, mix))
        # nor is anything lost where no domain was ever that large (PCIe
        # pairs): the shape lands split there whatever is taken
        pairs = ('a', 'a', 'b', 'b', 'c', 'c', 'd', 'd')
        self.assertEqual(0.0, fragmentation.fragmentation(
            free, 64, 262144, mix, pairs))

    def test_share_costs_rank_gpus_as_fragmentation_after(self):
        # taking the share on GPU i or j changes the host's fragmentation
        # by what share_costs says, up to the same term for every GPU and
        # times the share of the host its CPU and RAM feed
        for mix, free, vcpus, ram, domains in self._cases():
            share = 0.125
            usable = [i for i, f in enumerate(free) if f >= share]
            costs = fragmentation.share_costs(free, vcpus, ram, mix, share,
                                              domains)
            if not usable:
                continue
            taken = list(free)
            taken[usable[0]] -= share
            fed = _fed_share(taken, vcpus, ram, mix)
            after = {}
            for i in usable:
                taken = list(free)
                taken[i] -= share
                after[i] = fragmentation.fragmentation(taken, vcpus, ram,
                                                       mix, domains)
            for i in usable:
                for j in usable:
                    self.assertAlmostEqual(
                        after[i] - after[j],
                        fed * (costs[i] - costs[j]), places=9,
                        msg='%s free=%s domains=%s' % (mix, free, domains))


class TestMixLearner(base.PluginTestCase):

    def test_learns_probabilities(self):
        learner = fragmentation.MixLearner()
        for _ in range(3):
            learner.learn(fragmentation.Shape(1.0, 4.0, 8192.0), 1.0)
        learner.learn(fragmentation.Shape(8.0, 64.0, 262144.0), 1.0)
        mix = learner.mix()
        self.assertEqual(
            (fragmentation.MixShape(prob=0.75, vcpus=4.0, ram_mb=8192.0,
                                    units=1.0),
             fragmentation.MixShape(prob=0.25, vcpus=64.0, ram_mb=262144.0,
                                    units=8.0)), mix.whole)
        self.assertEqual((), mix.part)

    def test_decay_forgets_old_requests(self):
        learner = fragmentation.MixLearner()
        old = fragmentation.Shape(8.0, 64.0, 262144.0)
        learner.learn(old, 0.5)
        for _ in range(12):
            learner.learn(fragmentation.Shape(0.125, 4.0, 8192.0), 0.5)
        mix = learner.mix()
        self.assertEqual((), mix.whole)
        self.assertEqual(1, len(mix.part))

    def test_bounded_number_of_shapes(self):
        learner = fragmentation.MixLearner(size=3)
        for cpu in range(1, 10):
            learner.learn(fragmentation.Shape(1.0, float(cpu), 1.0), 0.9)
        self.assertEqual([7.0, 8.0, 9.0],
                         [s.vcpus for s in learner.mix().whole])

    def test_requests_without_gpu_are_not_learned(self):
        learner = fragmentation.MixLearner()
        learner.learn(fragmentation.Shape(0.0, 4.0, 8192.0), 0.9)
        self.assertFalse(learner.mix())


class WeigherCase(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        # the test base starts a new GPU state cache: a new learner
        self.learner = fragmentation.learner(self.cache)
        self.flags(fragmentation_weight_multiplier=1.0,
                   group='gpu_weights')

    def add_passthrough(self, host, used, gpus=8):
        self.add_host(host, [no.gpu_state(host, i, mode='passthrough',
                                          assigned=i < used)
                             for i in range(gpus)])

    def raw(self, hosts, spec):
        return capacity.GpuFragmentationWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts], spec)

    def ranking(self, weighers, hosts, spec):
        return [w.obj.host for w in no.weigh(weighers, hosts, spec)]


class TestFragmentationWeigher(WeigherCase):

    def test_keeps_room_for_the_larger_shape_where_packing_does_not(self):
        # "four" has 4 free GPUs, "five" 5; a 1-GPU request: best-fit
        # packing takes "four", leaving no host with 4 free GPUs; the mix
        # expects 4-GPU servers, so the fragmentation weigher takes "five"
        self.flags(fragmentation_request_mix=['1:4:8192:1', '4:4:8192:1'],
                   group='gpu_scheduler')
        self.add_passthrough('four', used=4)
        self.add_passthrough('five', used=3)
        hosts = [
            no.host_state('four', allocation_candidates=[_claim('four', [4])]),
            no.host_state('five', allocation_candidates=[_claim('five', [3])])]
        spec = no.request_spec({'resources:%s' % RC: '1'})
        self.assertEqual('four', self.ranking(
            [capacity.GpuPackingWeigher()], hosts, spec)[0])
        self.assertEqual('five', self.ranking(
            [capacity.GpuFragmentationWeigher()], hosts, spec)[0])
        # four: 0 -> 3 stranded for the 4-GPU half; five: 0 -> 0
        self.assertEqual([-1.5, 0.0], self.raw(hosts, spec))

    def test_prefers_gpus_already_stranded_by_cpu(self):
        # both hosts have 2 free GPUs; "tight" has only 4 free vCPUs, so
        # the 16-vCPU servers the mix expects cannot use its GPUs anyway
        # (64 vCPUs: 16 at Nova's cpu_allocation_ratio 4.0)
        self.flags(fragmentation_request_mix=['1:16:1024:1'],
                   group='gpu_scheduler')
        self.add_passthrough('tight', used=0, gpus=2)
        self.add_passthrough('roomy', used=0, gpus=2)
        hosts = [
            no.host_state('roomy', vcpus=16,
                          allocation_candidates=[_claim('roomy', [0])]),
            no.host_state('tight', vcpus=16, vcpus_used=60,
                          allocation_candidates=[_claim('tight', [0])])]
        spec = no.request_spec({'resources:%s' % RC: '1'}, vcpus=4,
                               memory_mb=1024)
        self.assertEqual('tight', self.ranking(
            [capacity.GpuFragmentationWeigher()], hosts, spec)[0])

    def test_request_without_gpus_keeps_off_free_gpus(self):
        # a CPU-only server taking "idle"'s vCPUs would strand its GPUs
        self.flags(fragmentation_request_mix=['1:16:1024:1'],
                   group='gpu_scheduler')
        self.add_passthrough('idle', used=0, gpus=2)
        self.add_passthrough('full', used=2, gpus=2)
        hosts = [no.host_state(h, vcpus=8,
                               allocation_candidates=no.plain_candidates(h))
                 for h in ('idle', 'full')]
        # 32 vCPUs (8 at ratio 4.0); 24 taken leave 8, too few for the
        # 16-vCPU GPU servers the mix expects
        spec = no.request_spec({}, vcpus=24, memory_mb=1024)
        self.assertEqual([-2.0, 0.0], self.raw(hosts, spec))
        self.assertEqual('full', self.ranking(
            [capacity.GpuFragmentationWeigher()], hosts, spec)[0])

    def test_learns_the_mix_from_requests(self):
        # nothing configured: the first request is all the process knows
        self.add_passthrough('four', used=4)
        self.add_passthrough('five', used=3)
        hosts = [no.host_state(h, allocation_candidates=[_claim(h, gpus)])
                 for h, gpus in (('four', [4, 5, 6, 7]),
                                 ('five', [3, 4, 5, 6]))]
        spec = no.request_spec({'resources:%s' % RC: '4'})
        # a 4-GPU mix: "four" is left empty (nothing stranded), "five"
        # keeps 1 GPU no 4-GPU server can use
        self.assertEqual([0.0, -1.0], self.raw(hosts, spec))
        self.assertEqual((fragmentation.MixShape(
            prob=1.0, vcpus=4.0, ram_mb=8192.0, units=4.0),),
            self.learner.mix().whole)
        # the same request object is learned once
        self.raw(hosts, spec)
        self.assertEqual(1, len(self.learner.mix().whole))

    def test_off_by_default(self):
        self.flags(fragmentation_weight_multiplier=0.0, group='gpu_weights')
        self.add_passthrough('four', used=4)
        hosts = [no.host_state('four', allocation_candidates=[
            _claim('four', [4])])]
        self.assertEqual([0.0], self.raw(
            hosts, no.request_spec({'resources:%s' % RC: '1'})))
        self.assertFalse(self.learner.mix())

    def test_host_without_state_weighs_as_average(self):
        self.flags(fragmentation_request_mix=['1:4:8192:1', '4:4:8192:1'],
                   group='gpu_scheduler')
        self.add_passthrough('four', used=4)
        self.add_passthrough('five', used=3)
        hosts = [no.host_state(h, allocation_candidates=[_claim(h, [7])])
                 for h in ('four', 'ghost', 'five')]
        raw = self.raw(hosts, no.request_spec({'resources:%s' % RC: '1'}))
        self.assertEqual((raw[0] + raw[2]) / 2, raw[1])


class TestFragmentationOrder(WeigherCase):
    """The ``fragmentation`` intra-host policy."""

    def _first_gpu(self, host, policy, amount=2):
        spec = no.request_spec({'resources:VGPU': str(amount),
                                'gpu:intra_host_policy': policy})
        out = no.run_filters([candidate_order.GpuCandidateOrderFilter()],
                             [host], spec)
        self.assertEqual([host], out)
        rps = {no.rp_uuid('h', no.pci(i)): i for i in range(3)}
        first = host.allocation_candidates[0]['allocations']
        return [rps[rp] for rp in first if rp in rps][0]

    def test_vgpu_share_leaves_a_usable_remainder(self):
        # free 5/8, 6/8 and 8/8 of a GPU; a 2/8 request, a mix of 4/8
        # shapes: pack takes the 5/8 GPU and leaves 3/8 no 4/8 server can
        # use; fragmentation takes the 6/8 one and leaves 4/8
        self.flags(fragmentation_request_mix=['0.5:4:8192:1'],
                   group='gpu_scheduler')
        self.add_host('h', [no.gpu_state('h', i, available=a)
                            for i, a in enumerate((5, 6, 8))])

        def host():
            return no.host_state('h', allocation_candidates=no.candidates(
                'h', [2, 1, 0], amount=2))
        self.assertEqual(0, self._first_gpu(host(), 'pack'))
        self.assertEqual(1, self._first_gpu(host(), 'fragmentation'))

    def test_whole_gpus_follow_pack(self):
        self.flags(fragmentation_request_mix=['1:4:8192:1'],
                   group='gpu_scheduler')
        self.add_host('h', [no.gpu_state('h', i, available=a)
                            for i, a in enumerate((8, 3, 8))])
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', [2, 1, 0], amount=8))
        self.assertEqual(self._first_gpu(host, 'pack', 8),
                         self._first_gpu(host, 'fragmentation', 8))

    def test_policy_is_a_valid_extra_spec_and_option(self):
        self.flags(intra_host_policy='fragmentation', group='gpu_scheduler')
        self.add_host('h', [no.gpu_state('h', i) for i in range(2)])
        host = no.host_state('h', allocation_candidates=no.candidates(
            'h', [1, 0]))
        spec = no.request_spec({'resources:VGPU': '1'})
        self.assertEqual([host], no.run_filters(
            [candidate_order.GpuCandidateOrderFilter()], [host], spec))


class TestCandidateLimitWarning(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        # once per process: a process that has not warned yet
        self.useFixture(fixtures.MockPatchObject(filtering, '_limit_warned',
                                                 False))
        self.flags(max_placement_results=4, group='scheduler')
        for h in ('a', 'b'):
            self.add_host(h, [no.gpu_state(h, i) for i in range(2)])

    def _run(self, per_host):
        hosts = [no.host_state(h, allocation_candidates=no.candidates(
            h, range(per_host))) for h in ('a', 'b')]
        spec = no.request_spec({'resources:VGPU': '1'})
        no.run_filters([candidate_order.GpuCandidateOrderFilter()], hosts,
                       spec)
        return self.log_lines('max_placement_results')

    def test_warns_once_when_the_list_reaches_the_limit(self):
        self.assertEqual([], self._run(1))
        lines = self._run(2)
        self.assertEqual(1, len(lines))
        for option in ('[scheduler] max_placement_results=4',
                       'max_allocation_candidates',
                       'allocation_candidates_generation_strategy'):
            self.assertIn(option, lines[0])
        self.assertEqual(1, len(self._run(2)))

    def test_not_without_a_packing_or_spreading_policy(self):
        self.flags(packing_weight_multiplier=0.0, group='gpu_weights')
        self.assertEqual([], self._run(2))
        self.flags(fragmentation_weight_multiplier=2.0, group='gpu_weights')
        self.assertEqual(1, len(self._run(2)))
