# SPDX-License-Identifier: Apache-2.0

"""``assigned`` of a passthrough GPU, from the agent to the state cache."""
import json

import testtools

from gpu_nova_ext.agent import payload
from gpu_nova_ext.inventory import base
from gpu_nova_ext.state import cache
from gpu_nova_ext.state import schema

ROOT = '9f6b6f0e-3d0b-4f0e-9a57-2f4f3c7c1a10'


def _gpu(addr: str, assigned, mode: str = 'passthrough',
         rp: str | None = None) -> base.Gpu:
    return base.Gpu(pci_address=addr, vendor='nvidia',
                    model='H100_80GB_HBM3', memory_mib=81920, mode=mode,
                    cuda_cc='9.0', driver_version='550.54.15',
                    provider_uuids=[rp] if rp else [], assigned=assigned)


def _record(state):
    """The scheduler's record of a state, sent as the agent sends it."""
    states = cache.GpuStateCache(clock=lambda: 1764430000.0)
    for message in payload.Publisher().messages(state):
        assert states.update(message)
    return states.host_record(state['host'])


class TestAssigned(testtools.TestCase):

    def build(self, *gpus):
        return payload.build_payload(
            base.HostInventory(host='cmp-1', gpus=list(gpus)), host='cmp-1',
            nodename='cmp-1', root_provider_uuid=ROOT, mode='annotate',
            now=1764430000)

    def test_to_state_emits_assigned(self):
        # unknown: the optional key is left out (the cache reads it as null)
        self.assertNotIn('assigned',
                         base.Gpu(pci_address='0000:3b:00.0').to_state())
        self.assertIs(True, _gpu('0000:3b:00.0', True).to_state()['assigned'])
        self.assertIs(False,
                      _gpu('0000:3b:00.0', False).to_state()['assigned'])

    def test_payload_passes_it_through_json(self):
        p = json.loads(json.dumps(self.build(
            _gpu('0000:1b:00.0', True, rp='rp-1'),
            _gpu('0000:9c:00.0', False, rp='rp-2'),
            _gpu('0000:ca:00.0', None, mode='vgpu', rp='rp-3'))))
        self.assertEqual([True, False, None],
                         [g.get('assigned') for g in p['gpus']])

    def test_scheduler_side_counts_assigned_gpus_busy(self):
        rps = ['11111111-1111-4111-8111-11111111111%d' % i for i in range(3)]
        p = self.build(_gpu('0000:1b:00.0', True, rp=rps[0]),
                       _gpu('0000:9c:00.0', False, rp=rps[1]),
                       _gpu('0000:ca:00.0', None, rp=rps[2]))
        for message in payload.Publisher().messages(p):
            self.assertIsNone(schema.problem(message, 64))
        record = _record(p)
        # the assigned GPU is not idle; the unknown one is counted free
        # but left to Placement's candidates
        self.assertEqual(2, record.idle_gpus)
        self.assertEqual(2.0, record.free_units)
        self.assertEqual([rps[2]], [g.provider_uuids[0]
                                    for g in record.passthrough_unknown])
        all_busy = self.build(_gpu('0000:1b:00.0', True, rp=rps[0]),
                              _gpu('0000:9c:00.0', True, rp=rps[1]))
        record = _record(all_busy)
        self.assertEqual(0, record.idle_gpus)
        self.assertEqual((), record.passthrough_unknown)
