# SPDX-License-Identifier: Apache-2.0

"""The state payload the agent casts (design doc: State protocol)."""
import json

import testtools

from gpu_nova_ext.agent import payload
from gpu_nova_ext.inventory import base


class TestBuildPayload(testtools.TestCase):

    def inventory(self):
        gpu = base.Gpu(pci_address='0000:3b:00.0', vendor='nvidia',
                       model='A100_80GB_PCIE', memory_mib=81920,
                       mode='vgpu', offered_vgpu_type='nvidia-471',
                       cuda_cc='8.0', driver_version='550.54.15',
                       mig_capable=True, mig_enabled=False,
                       provider_uuids=['rp-1'],
                       metrics={'utilization_pct': 12.5},
                       health=base.Health('degraded', ['temperature']))
        return base.HostInventory(host='cmp-1', gpus=[gpu])

    def test_shape(self):
        p = payload.build_payload(
            self.inventory(), host='cmp-1', nodename='cmp-1.example',
            root_provider_uuid='root', mode='annotate', now=1764430000)
        # not a message: no version (the Publisher's messages have one)
        self.assertEqual({'host', 'nodename', 'generated_at',
                          'agent_mode', 'root_provider_uuid', 'gpus'},
                         set(p))
        self.assertEqual(1764430000.0, p['generated_at'])
        self.assertIsInstance(p['generated_at'], float)
        gpu = p['gpus'][0]
        self.assertEqual(['rp-1'], gpu['provider_uuids'])
        self.assertEqual({'state': 'degraded', 'reasons': ['temperature']},
                         gpu['health'])
        self.assertEqual({'capable': True, 'enabled': False}, gpu['mig'])
        json.dumps(p)

    def test_accepted_by_the_scheduler_side_validation(self):
        from gpu_nova_ext.state import schema
        p = payload.build_payload(
            self.inventory(), host='cmp-1', nodename='cmp-1',
            root_provider_uuid='9f6b6f0e-3d0b-4f0e-9a57-2f4f3c7c1a10',
            mode='inventory')
        messages = payload.Publisher().messages(p)
        self.assertEqual([(schema.VERSION, schema.FACTS),
                          (schema.VERSION, schema.METRICS)],
                         [(m['version'], m['kind']) for m in messages])
        for message in messages:
            self.assertIsNone(schema.problem(message, 64))
        # the whole state is no message: the schedulers refuse it
        self.assertIn('is not read here', schema.problem(p, 64))

    def test_now_defaults_to_the_clock(self):
        p = payload.build_payload(base.HostInventory('h'), host='h',
                                  nodename=None, root_provider_uuid=None,
                                  mode='annotate')
        self.assertGreater(p['generated_at'], 1.7e9)
        self.assertEqual([], p['gpus'])


class TestPublisher(testtools.TestCase):
    """Protocol 1.1: facts when they change, metrics every time."""

    def payload(self, utilization=12.5, model='A100_80GB_PCIE', now=1.0):
        gpu = base.Gpu(pci_address='0000:3b:00.0', vendor='nvidia',
                       model=model, memory_mib=81920, mode='passthrough',
                       provider_uuids=['rp-1'],
                       metrics={'utilization_pct': utilization,
                                'fan_speed_pct': 30.0,
                                'pcie_tx_kib_s': 1000.0},
                       health=base.Health('healthy', []))
        return payload.build_payload(
            base.HostInventory(host='cmp-1', gpus=[gpu]), host='cmp-1',
            nodename='cmp-1', root_provider_uuid='root', mode='annotate',
            now=now)

    def test_facts_only_when_they_change_or_are_asked_for(self):
        pub = payload.Publisher()
        kinds = [m['kind'] for m in pub.messages(self.payload())]
        self.assertEqual(['facts', 'metrics'], kinds)
        # only metrics changed
        kinds = [m['kind'] for m in pub.messages(self.payload(50.0, now=2))]
        self.assertEqual(['metrics'], kinds)
        kinds = [m['kind'] for m in pub.messages(self.payload(model='H100'))]
        self.assertEqual(['facts', 'metrics'], kinds)
        kinds = [m['kind'] for m in pub.messages(self.payload(model='H100'),
                                                 resend=True)]
        self.assertEqual(['facts', 'metrics'], kinds)
        # a failed cast: the facts go again
        pub.forget()
        kinds = [m['kind'] for m in pub.messages(self.payload(model='H100'))]
        self.assertEqual(['facts', 'metrics'], kinds)

    def test_metrics_carry_only_what_schedulers_use(self):
        from gpu_nova_ext.state import schema
        facts, metrics = payload.Publisher().messages(self.payload())
        self.assertEqual(facts['digest'], metrics['digest'])
        self.assertLess(facts['seq'], metrics['seq'])
        self.assertEqual({'utilization_pct': 12.5},
                         metrics['gpus'][0]['metrics'])
        self.assertLessEqual(set(metrics['gpus'][0]['metrics']),
                             set(schema.SCHEDULER_METRICS))
        self.assertNotIn('metrics', facts['gpus'][0])
        self.assertNotIn('health', facts['gpus'][0])
