# SPDX-License-Identifier: Apache-2.0

"""Multi-GPU servers on PCI-in-Placement GPUs joined in NVLink-bridged
pairs, through Nova's API, scheduler and Placement (design doc:
Topology): the agent reports each GPU's link domain, GpuTopologyFilter and
GpuCandidateOrderFilter choose among Placement's candidates."""
from nova.tests.functional.libvirt import base as libvirt_base

from gpu_nova_ext.tests.functional.nova import base

HOST = 'pairs1'
ALIAS = 'gpu-a100-80gb-pcie'
ADDRESSES = ['0000:81:%02x.0' % slot for slot in range(4)]


def _bridged(slot: int) -> dict:
    """Slots 0-1 and 2-3 are NVLink-bridged pairs, each behind a switch."""
    partner = ADDRESSES[slot ^ 1]
    return base.gpu(base.A100, nvlink_peers={partner: 12},
                    pci_switch='0000:80:%02x.0' % (slot // 2))


class PairsTest(base.GpuSchedulerMixin, base.GpuAgentMixin,
                libvirt_base.ServersTestBase):
    """One host with four A100s in two bridged pairs, passed through."""

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS

    def setUp(self):
        super().setUp()
        a100 = ('20b5', 'GA100 [A100 PCIe 80GB]')
        self.drop_in, self.payload = self.start_pci_in_placement_host(
            HOST, [a100 + (_bridged(slot),) for slot in range(4)])

    def _gpus(self, server) -> list[str]:
        """The PCI addresses of the GPUs the server's allocation took."""
        allocs = self._get_allocations_by_server_uuid(server['id'])
        names = [self.placement.get('/resource_providers/%s' % rp).body[
            'name'] for rp, alloc in allocs.items()
            if any(rc.startswith('CUSTOM_') for rc in alloc['resources'])]
        return sorted(name.split('_', 1)[1].lower() for name in names)

    def _two(self, **extra) -> dict:
        return dict({'pci_passthrough:alias': '%s:2' % ALIAS,
                     'group_policy': 'isolate'}, **extra)

    def test_agent_reports_the_pairs(self):
        domains = {g['pci_address']: g.get('link_domain')
                   for g in self.payload['gpus']}
        self.assertEqual({ADDRESSES[0]: ADDRESSES[0],
                          ADDRESSES[1]: ADDRESSES[0],
                          ADDRESSES[2]: ADDRESSES[2],
                          ADDRESSES[3]: ADDRESSES[2]}, domains)

    def test_a_pair_then_the_other_pair(self):
        server = self.boot(self._two())
        self.assertEqual(ADDRESSES[:2], self._gpus(server))
        self.run_agent(HOST)
        self.assertEqual(ADDRESSES[2:], self._gpus(self.boot(self._two())))

    def test_the_whole_pair_when_one_is_half_used(self):
        one = self.boot({'pci_passthrough:alias': '%s:1' % ALIAS})
        (taken,) = self._gpus(one)
        self.run_agent(HOST)
        whole = ADDRESSES[2:] if taken in ADDRESSES[:2] else ADDRESSES[:2]
        self.assertEqual(whole, self._gpus(self.boot(self._two())))

    def test_nvlink_required_that_no_host_has(self):
        # four GPUs in one NVLink domain: the host has pairs only
        self.boot({'pci_passthrough:alias': '%s:4' % ALIAS,
                   'group_policy': 'isolate', 'gpu:topology': 'nvlink'},
                  expected_state='ERROR')
        # the scheduler says at INFO which of our rules removed the host
        self.assertRegex(
            self.stdlog.logger.output,
            r'INFO \[gpu_nova_ext\.scheduler\.filtering\] GPU filters '
            r'left no host for this request; hosts removed per rule: '
            r'GpuTopologyFilter 1\n')
        # without the requirement the four GPUs are given
        server = self.boot({'pci_passthrough:alias': '%s:4' % ALIAS,
                            'group_policy': 'isolate'})
        self.assertEqual(ADDRESSES, self._gpus(server))
