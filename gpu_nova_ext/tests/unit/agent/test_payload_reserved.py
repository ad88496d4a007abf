# SPDX-License-Identifier: Apache-2.0

"""A GPU's reservation in the state (design doc: Reservations): an
optional fact, sent as facts when it changes, read by the scheduler."""
import testtools

from gpu_nova_ext.agent import payload
from gpu_nova_ext.inventory import base
from gpu_nova_ext.state import records
from gpu_nova_ext.state import schema

PROJECT = '6f70656e737461636b20342065766572'


def _payload(reserved_for=None):
    gpus = [base.Gpu(pci_address='0000:3b:00.0', model='A100_80GB_PCIE',
                     mode='passthrough', provider_uuids=['rp-1'],
                     reserved_for=reserved_for),
            base.Gpu(pci_address='0000:86:00.0', model='A100_80GB_PCIE',
                     mode='passthrough', provider_uuids=['rp-2'])]
    return payload.build_payload(
        base.HostInventory(host='cmp-1', gpus=gpus), host='cmp-1',
        nodename='cmp-1', root_provider_uuid='root', mode='annotate',
        now=1.0)


class TestReservedFor(testtools.TestCase):

    def test_only_reserved_gpus_carry_it(self):
        p = _payload(PROJECT)
        self.assertEqual(PROJECT, p['gpus'][0]['reserved_for'])
        self.assertNotIn('reserved_for', p['gpus'][1])
        self.assertNotIn('reserved_for', _payload()['gpus'][0])
        facts, _metrics = payload.Publisher().messages(p)
        self.assertEqual(PROJECT, facts['gpus'][0]['reserved_for'])
        self.assertIsNone(schema.problem(facts, 64))

    def test_a_new_reservation_is_a_facts_change(self):
        pub = payload.Publisher()
        pub.messages(_payload())
        kinds = [m['kind'] for m in pub.messages(_payload(PROJECT))]
        self.assertEqual(['facts', 'metrics'], kinds)
        self.assertNotEqual(payload.facts_digest(_payload()),
                            payload.facts_digest(_payload(PROJECT)))

    def test_records_group_gpus_by_project(self):
        message, _metrics = payload.Publisher().messages(_payload(PROJECT))
        facts = records.host_facts(message)
        self.assertEqual(PROJECT, facts.gpus[0].reserved_for)
        self.assertIsNone(facts.gpus[1].reserved_for)
        self.assertEqual(('rp-1',), facts.reserved_providers(PROJECT))
        self.assertEqual((), facts.reserved_providers('other'))
        self.assertEqual((), facts.reserved_providers(None))
        self.assertEqual({PROJECT: ('rp-1',), None: ('rp-2',)},
                         facts.groups[records.FAMILY_RESERVATION])
