# SPDX-License-Identifier: Apache-2.0

"""gpu:topology, GpuTopologyFilter and the multi-GPU choice inside a host,
on real Nova HostStates and filter handler (design doc: Topology)."""
import itertools

from nova.scheduler import weights as nova_weights

from gpu_nova_ext.scheduler.filters import candidate_order
from gpu_nova_ext.scheduler.filters import topology
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.scheduler.weighers import capacity
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

RC = 'CUSTOM_GPU_A100'
PCIE_PAIRS = [  # two NVLink-bridged pairs per socket, a switch per pair
    (0, '0000:10:00.0', '0000:0a:00.0'), (0, '0000:10:00.0', '0000:0a:00.0'),
    (0, '0000:12:00.0', '0000:0b:00.0'), (0, '0000:12:00.0', '0000:0b:00.0'),
    (1, '0000:14:00.0', '0000:8a:00.0'), (1, '0000:14:00.0', '0000:8a:00.0'),
    (1, '0000:16:00.0', '0000:8b:00.0'), (1, '0000:16:00.0', '0000:8b:00.0')]


def _gpu(host, i, numa, domain, switch, assigned=False):
    return dict(no.gpu_state(host, i, mode='passthrough', assigned=assigned),
                numa_node=numa, link_domain=domain, pci_switch=switch)


def _cand(host, indexes):
    """A candidate drawing one passthrough GPU (a PCI provider) each."""
    allocations = {no.rp_uuid(host): {'resources': {'VCPU': 8,
                                                    'MEMORY_MB': 16384}}}
    for i in indexes:
        allocations[no.rp_uuid(host, no.pci(i))] = {'resources': {RC: 1}}
    return {'allocations': allocations, 'mappings': {}}


def _indexes(host, cand):
    by_rp = {no.rp_uuid(host, no.pci(i)): i for i in range(8)}
    return sorted(by_rp[rp] for rp in cand['allocations'] if rp in by_rp)


class TopologyCase(base.PluginTestCase):

    def add_pairs(self, host, used=()):
        self.add_host(host, [_gpu(host, i, *PCIE_PAIRS[i],
                                  assigned=i in used) for i in range(8)])

    def host(self, name, count, used=()):
        """Placement's candidates: every set of free GPUs of that size.

        The widest sets first: Placement's order knows nothing of links.
        """
        free = [i for i in range(8) if i not in used]
        combos = sorted(itertools.combinations(free, count),
                        key=lambda c: c[0] - c[-1])
        return no.host_state(name, allocation_candidates=[
            _cand(name, combo) for combo in combos])

    def spec(self, count, topology=None):
        extra = {'resources:%s' % RC: str(count)}
        if topology:
            extra['gpu:topology'] = topology
        return no.request_spec(extra)


class TestRequest(TopologyCase):

    def test_values_and_constraint(self):
        self.assertEqual(('nvlink', 'switch', 'numa', 'prefer', 'any'),
                         request.KEYS['gpu:topology'].choices)
        req = request.parse_extra_specs({'gpu:topology': 'nvlink'})
        self.assertEqual('nvlink', req.topology)
        self.assertTrue(req.constrained)
        self.assertFalse(request.parse_extra_specs(
            {'gpu:topology': 'prefer'}).constrained)
        bad = request.parse_extra_specs({'gpu:topology': 'NVLINK'})
        self.assertEqual(['GpuTopologyFilter'],
                         [e.filter_name for e in bad.errors])


class TestTopologyFilter(TopologyCase):

    def test_nvlink_keeps_only_the_bridged_pairs(self):
        self.add_pairs('h')
        host = self.host('h', 2)
        passed = no.run_filters([topology.GpuTopologyFilter()], [host],
                                self.spec(2, 'nvlink'))
        self.assertEqual([host], passed)
        self.assertEqual([[0, 1], [2, 3], [4, 5], [6, 7]],
                         [_indexes('h', c)
                          for c in host.allocation_candidates])

    def test_numa_and_switch(self):
        self.add_pairs('h')
        host = self.host('h', 4)
        no.run_filters([topology.GpuTopologyFilter()], [host],
                       self.spec(4, 'numa'))
        self.assertEqual([[0, 1, 2, 3], [4, 5, 6, 7]],
                         [_indexes('h', c)
                          for c in host.allocation_candidates])
        host = self.host('h', 4)
        self.assertEqual([], no.run_filters(
            [topology.GpuTopologyFilter()], [host], self.spec(4, 'switch')))

    def test_host_without_an_intact_domain_is_dropped(self):
        # one GPU of each pair is taken: no two free GPUs share a link
        self.add_pairs('broken', used=(0, 2, 4, 6))
        self.add_pairs('whole', used=(0, 1, 2, 3, 4, 5))
        hosts = [self.host('broken', 2, used=(0, 2, 4, 6)),
                 self.host('whole', 2, used=(0, 1, 2, 3, 4, 5))]
        passed = no.run_filters([topology.GpuTopologyFilter()], hosts,
                                self.spec(2, 'nvlink'))
        self.assertEqual(['whole'], [h.host for h in passed])

    def test_candidates_cut_by_placement_are_said(self):
        self.add_pairs('cut')
        self.add_pairs('broken', used=(0, 2, 4, 6))
        # Placement's cap left the first two (widest) sets of each host
        hosts = [self.host('cut', 2), self.host('broken', 2,
                                                 used=(0, 2, 4, 6))]
        for host in hosts:
            host.allocation_candidates = host.allocation_candidates[:2]
        self.assertEqual([], no.run_filters(
            [topology.GpuTopologyFilter()], hosts, self.spec(2, 'nvlink')))
        lines = self.log_lines('allocation candidates Placement returned')
        # the host with free pairs is named; the one without is not
        self.assertEqual(1, len(lines), lines)
        self.assertIn('host cut has 2 free GPUs in one NVLink domain, but '
                      'none of the 2 allocation candidates', lines[0])
        self.assertIn('max_allocation_candidates', lines[0])

    def test_unknown_topology_never_meets_a_requirement(self):
        self.add_host('old', [no.gpu_state('old', i, mode='passthrough')
                              for i in range(2)])
        self.assertEqual([], no.run_filters(
            [topology.GpuTopologyFilter()], [self.host('old', 2, used=(
                2, 3, 4, 5, 6, 7))], self.spec(2, 'nvlink')))

    def test_one_gpu_and_no_requirement_pass(self):
        self.add_pairs('h')
        for count, spec in ((1, self.spec(1, 'nvlink')), (2, self.spec(2)),
                            (2, self.spec(2, 'any'))):
            host = self.host('h', count)
            count = len(host.allocation_candidates)
            self.assertEqual([host], no.run_filters(
                [topology.GpuTopologyFilter()], [host], spec))
            self.assertEqual(count, len(host.allocation_candidates))


class TestMultiGpuChoice(TopologyCase):

    def choose(self, host, spec):
        no.run_filters([candidate_order.GpuCandidateOrderFilter()], [host],
                       spec)
        return _indexes(host.host, host.allocation_candidates[0])

    def test_a_pair_not_two_halves(self):
        self.add_pairs('h')
        self.assertEqual([0, 1], self.choose(self.host('h', 2),
                                             self.spec(2)))

    def test_the_half_used_island_before_a_whole_one(self):
        # pair 0-1 is half used: GPU 1 with a free GPU of another pair
        # would split two pairs; a 2-GPU server takes a whole pair
        used = (0, 4, 5)
        self.add_pairs('h', used=used)
        self.assertIn(self.choose(self.host('h', 2, used), self.spec(2)),
                      ([2, 3], [6, 7]))
        self.add_pairs('h2', used=(0, 2, 4, 5))
        self.assertEqual([6, 7], self.choose(
            self.host('h2', 2, (0, 2, 4, 5)), self.spec(2)))

    def test_four_gpus_on_one_socket(self):
        self.add_pairs('h')
        self.assertEqual([0, 1, 2, 3], self.choose(self.host('h', 4),
                                                   self.spec(4)))

    def test_the_four_gpu_island_is_not_broken(self):
        # HGX-like: GPUs 0-3 one NVLink domain, 4-7 another; 4 and 5 are
        # taken: a 2-GPU server takes 6 and 7, not two of the whole four
        self.add_host('hgx', [
            _gpu('hgx', i, i // 4, no.pci(0 if i < 4 else 4),
                 '0000:%02x:00.0' % (1 + i // 2), assigned=i in (4, 5))
            for i in range(8)])
        self.assertEqual([6, 7], self.choose(
            self.host('hgx', 2, (4, 5)), self.spec(2)))

    def test_any_keeps_the_policy_order(self):
        # GPU 0 taken: the policy's first GPU is 1 (PCI order among
        # equals), whose pair is broken; with "any" it is still chosen
        self.add_pairs('h', used=(0,))
        self.assertIn(1, self.choose(self.host('h', 2, (0,)),
                                     self.spec(2, 'any')))
        self.assertNotIn(1, self.choose(self.host('h', 2, (0,)),
                                        self.spec(2)))


class TestTopologyWeigher(TopologyCase):

    def test_half_used_domains_first(self):
        # "split": GPU 0 of every pair taken; "whole": nothing taken.  A
        # 1-GPU server uses up a pair on "split" (room 1) and leaves the
        # whole pairs of "whole" (room 2) to 2-GPU servers
        self.add_pairs('split', used=(0, 2, 4, 6))
        self.add_pairs('whole')
        hosts = [self.host('whole', 1), self.host('split', 1, (0, 2, 4, 6))]
        spec = self.spec(1)
        raw = capacity.GpuTopologyWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts], spec)
        self.assertEqual([-2.0, -1.0], raw)
        ranked = no.weigh([capacity.GpuTopologyWeigher()], hosts, spec)
        self.assertEqual('split', ranked[0].obj.host)

    def test_gpus_without_a_domain_weigh_as_the_mean(self):
        self.add_host('old', [no.gpu_state('old', i, mode='passthrough')
                              for i in range(2)])
        self.add_pairs('whole')
        hosts = [self.host('old', 1, (2, 3, 4, 5, 6, 7)),
                 self.host('whole', 1)]
        raw = capacity.GpuTopologyWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts],
            self.spec(1))
        self.assertEqual([-2.0, -2.0], raw)

    def test_use_unknown_to_the_agent_read_from_the_candidates(self):
        # no "assigned" from the agent: a GPU no candidate offers is taken
        self.add_host('h', [{k: v for k, v in _gpu(
            'h', i, *PCIE_PAIRS[i]).items() if k != 'assigned'}
            for i in range(8)])
        self.assertTrue(self.cache.host_record('h').passthrough_unknown)
        self.add_pairs('whole')
        hosts = [self.host('h', 1, (0, 2, 4, 6)), self.host('whole', 1)]
        raw = capacity.GpuTopologyWeigher().weigh_objects(
            [nova_weights.WeighedHost(h, 0.0) for h in hosts], self.spec(1))
        self.assertEqual([-1.0, -2.0], raw)
