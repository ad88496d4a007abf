# SPDX-License-Identifier: Apache-2.0

"""Link domains and the nvidia-smi style relation (pure)."""
import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import merge
from gpu_nova_ext.inventory import topology


def gpu(address, peers=None, numa=None, switch=None):
    return base.Gpu(pci_address=address, nvlink_peers=dict(peers or {}),
                    numa_node=numa, pci_switch=switch)


A, B, C, D = ('0000:1b:00.0', '0000:43:00.0', '0000:9d:00.0',
              '0000:c3:00.0')
SW1, SW2 = '0000:05:00.0', '0000:06:00.0'


class TestLinkDomains(testtools.TestCase):

    def test_bridged_pairs_are_two_domains_named_by_lowest_address(self):
        gpus = [gpu(D, {C: 12}), gpu(C, {D: 12}), gpu(B, {A: 12}),
                gpu(A, {B: 12})]
        self.assertEqual({A: A, B: A, C: C, D: C},
                         topology.link_domains(gpus))

    def test_gpus_on_one_nvswitch_fabric_are_one_domain(self):
        gpus = [gpu(a, {SW1: 9, SW2: 9}) for a in (D, B, C, A)]
        self.assertEqual({A}, set(topology.link_domains(gpus).values()))

    def test_chains_through_switches_join(self):
        # A-SW1-B, B-SW2-C: one component
        gpus = [gpu(A, {SW1: 2}), gpu(B, {SW1: 2, SW2: 2}),
                gpu(C, {SW2: 2}), gpu(D)]
        self.assertEqual({A: A, B: A, C: A, D: None},
                         topology.link_domains(gpus))

    def test_no_link_no_domain(self):
        gpus = [gpu(A), gpu(B, {A: 0})]
        self.assertEqual({A: None, B: None}, topology.link_domains(gpus))

    def test_a_peer_that_reports_no_links_is_in_its_peers_domain(self):
        # B's NVML read failed: A still says it is linked to B
        gpus = [gpu(A, {B: 4}), gpu(B)]
        self.assertEqual({A: A, B: A}, topology.link_domains(gpus))

    def test_merge_sets_domains_and_keeps_the_first_peers(self):
        inv = merge.merge([
            ('libvirt', {A: gpu(A, numa=0, switch='0000:19:00.0'),
                         B: gpu(B, numa=0, switch='0000:19:00.0')}),
            ('nvml', {A: gpu(A, {B: 12}), B: gpu(B, {A: 12})})], 'h')
        first = inv.gpus[0]
        self.assertEqual((A, {B: 12}, '0000:19:00.0', 0),
                         (first.link_domain, first.nvlink_peers,
                          first.pci_switch, first.numa_node))
        self.assertEqual(A, inv.gpus[1].link_domain)
        state = inv.gpus[1].to_state()
        self.assertEqual((A, '0000:19:00.0'),
                         (state['link_domain'], state['pci_switch']))
        self.assertNotIn('nvlink_peers', state)


class TestRelation(testtools.TestCase):

    def test_cells(self):
        a = gpu(A, {B: 12}, numa=0, switch=SW1)
        b = gpu(B, {A: 12}, numa=0, switch=SW1)
        c = gpu(C, numa=0, switch=SW1)
        d = gpu(D, numa=0, switch=SW2)
        e = gpu('0000:e1:00.0', numa=1)
        f = gpu('0000:f1:00.0')
        self.assertEqual(
            ['X', 'NV12', 'PIX', 'NODE', 'SYS', None],
            [topology.relation(a, x) for x in (a, b, c, d, e, f)])

    def test_links_through_shared_switches_count_as_nvidia_smi_does(self):
        hgx = {SW1: 5, SW2: 4, '0000:07:00.0': 4, '0000:08:00.0': 5}
        gpus = [gpu(a, hgx) for a in (A, B, C)]
        self.assertEqual([['X', 'NV18', 'NV18'], ['NV18', 'X', 'NV18'],
                          ['NV18', 'NV18', 'X']], topology.matrix(gpus))

    def test_matrix_is_in_address_order(self):
        rows = topology.matrix([gpu(B, numa=1), gpu(A, numa=0)])
        self.assertEqual([['X', 'SYS'], ['SYS', 'X']], rows)
