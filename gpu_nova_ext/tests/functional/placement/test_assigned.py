# SPDX-License-Identifier: Apache-2.0

"""``Gpu.assigned`` read from the usages of a real Placement.

Requests are counted at the server (the embedded Placement's counter).
"""
import uuid

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests.functional.placement import base

PCI_RC = compute_providers.pci_resource_class('10de', '20b5')


class TestAssigned(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.usage_gets: list[str] = []

        def record(environ):
            path = environ['PATH_INFO']
            if (environ['REQUEST_METHOD'] == 'GET'
                    and path.endswith('/usages')):
                self.usage_gets.append(path.split('/')[2])
            return None

        self.placement.hooks.append(record)

    def report(self, reporter, addrs, mode='passthrough'):
        inv = base.make_inventory(self.HOST, addrs, mode=mode)
        self.usage_gets.clear()
        self.placement.reset_counters()
        result = reporter.report(inv)
        return inv, result

    def test_pci_providers_with_and_without_allocations(self):
        root, pcis = self.pci_host(2)
        (a1, rp1), (a2, rp2) = pcis.items()
        consumer = str(uuid.uuid4())
        compute_providers.claim(self.nova, consumer, {rp1: {PCI_RC: 1}})
        reporter = self.make_reporter()
        inv, _ = self.report(reporter, [a1, a2])
        self.assertIs(True, inv.gpu(a1).assigned)
        self.assertIs(False, inv.gpu(a2).assigned)
        state = agent_payload.build_payload(
            inv, host=self.HOST, nodename=self.HOST,
            root_provider_uuid=root, mode='annotate')
        self.assertEqual([True, False],
                         [g['assigned'] for g in state['gpus']])

        # steady cycle: no write, one usages GET per GPU provider
        inv, result = self.report(reporter, [a1, a2])
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        self.assertEqual(0, result.writes)
        self.assertEqual(sorted([rp1, rp2]), sorted(self.usage_gets))
        self.assertIs(True, inv.gpu(a1).assigned)

        # deleting allocations does not move the provider's generation:
        # the next cycle still sees the GPU free
        compute_providers.unclaim(self.nova, consumer)
        inv, _ = self.report(reporter, [a1, a2])
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        self.assertEqual([False, False], [g.assigned for g in inv.gpus])

    def test_own_provider_in_inventory_mode(self):
        self.conf = self.make_conf(agent={'mode': 'inventory'})
        compute_providers.create_compute_node(self.nova, self.HOST)
        a1, a2 = base.addresses(2)
        reporter = self.make_reporter()
        inv, _ = self.report(reporter, [a1, a2])
        self.assertEqual([False, False], [g.assigned for g in inv.gpus])
        compute_providers.claim(self.nova, str(uuid.uuid4()),
                                {inv.gpu(a2).provider_uuids[0]:
                                 {'CUSTOM_GPU_A100_80GB_PCIE': 1}})
        inv, _ = self.report(reporter, [a1, a2])
        self.assertEqual(0, self.placement.writes, self.placement.write_log)
        self.assertEqual([False, True], [g.assigned for g in inv.gpus])
        self.assertEqual(2, len(self.usage_gets))

    def test_unknown_without_provider_and_for_vgpu(self):
        root, pgpus = self.vgpu_host(2)
        inv, _ = self.report(self.make_reporter(), list(pgpus), mode='vgpu')
        self.assertEqual([None, None], [g.assigned for g in inv.gpus])
        self.assertEqual([], self.usage_gets)
        self.assertEqual([None, None],
                         [g.to_state().get('assigned') for g in inv.gpus])
        # a passthrough GPU that nothing in Placement stands for
        inv, _ = self.report(self.make_reporter(), ['0000:d0:00.0'])
        self.assertEqual([], inv.gpus[0].provider_uuids)
        self.assertIsNone(inv.gpus[0].assigned)
        self.assertEqual([], self.usage_gets)

    def test_usages_unreadable_this_cycle(self):
        root, pcis = self.pci_host(2)

        def down(environ):
            if environ['PATH_INFO'].endswith('/usages'):
                return ('503 Service Unavailable', 'upstream gone')
            return None

        self.placement.hooks.append(down)
        inv, result = self.report(self.make_reporter(), list(pcis))
        # the cycle still succeeds; the GPUs are sent as unknown, and the
        # agent stops asking once Placement is unreachable: 1 try +
        # [placement] max_request_retries (2), for the first provider only
        self.assertEqual([None, None], [g.assigned for g in inv.gpus])
        self.assertEqual(3, len(self.usage_gets))
        self.assertEqual(list(pcis.values()),
                         [g.provider_uuids[0] for g in inv.gpus])
        self.assertEqual([], result.skipped)

        def bad(environ):
            if environ['PATH_INFO'].endswith(
                    '/%s/usages' % inv.gpus[0].provider_uuids[0]):
                return ('200 OK', {'usages': 'nope'})
            return None

        self.placement.hooks.remove(down)
        self.placement.hooks.append(bad)
        claimed = inv.gpus[1].provider_uuids[0]
        compute_providers.claim(self.nova, str(uuid.uuid4()),
                                {claimed: {PCI_RC: 1}})
        inv, _ = self.report(self.make_reporter(), list(pcis))
        # an undocumented answer makes that GPU unknown, not the others
        self.assertEqual([None, True], [g.assigned for g in inv.gpus])
