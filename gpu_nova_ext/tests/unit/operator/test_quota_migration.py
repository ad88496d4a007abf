# SPDX-License-Identifier: Apache-2.0

"""What the switch to unified limits would lose."""
from nova.limit import local as nova_local_limit
from nova.limit import placement as nova_placement_limit
import testtools

from gpu_nova_ext.operator import quota_migration as qm

DEFAULTS = {'instances': 10, 'cores': 20, 'ram': 51200, 'key_pairs': 100,
            'fixed_ips': -1}


class TestQuotaMigration(testtools.TestCase):

    def test_names_mirror_novas(self):
        nova = dict(nova_local_limit.LEGACY_LIMITS,
                    **nova_placement_limit.LEGACY_LIMITS)
        self.assertEqual({legacy: unified for unified, legacy in nova.items()},
                         qm.UNIFIED_NAMES)

    def test_defaults_without_registered_limits_are_lost(self):
        found = qm.compare(DEFAULTS, {}, {'servers': 10, 'class:VCPU': 8},
                           {})
        by_name = {f.resource_name: f for f in found}
        # fixed_ips is obsolete; servers is there with the same value
        self.assertEqual({'class:VCPU', 'class:PCPU', 'class:MEMORY_MB',
                          'server_key_pairs'}, set(by_name))
        self.assertFalse(by_name['class:VCPU'].lost)      # differs
        self.assertTrue(by_name['class:PCPU'].lost)       # cores, mirrored
        self.assertEqual('default: class:MEMORY_MB = 51200 (legacy ram) -> '
                         'after the switch no limit (unlimited, or 0 '
                         'where [quota] unified_limits_resource_strategy '
                         'requires one: servers by default)',
                         by_name['class:MEMORY_MB'].line())

    def test_project_overrides(self):
        registered = {'servers': 10, 'class:VCPU': 20, 'class:PCPU': 20}
        found = qm.compare(
            {'instances': 10, 'cores': 20},
            {'p1': {'instances': 10, 'cores': -1},
             'p2': {'instances': 10, 'cores': 20}},
            registered, {'p1': {'class:PCPU': -1}})
        self.assertEqual(
            ['project one (p1): class:VCPU = unlimited (legacy cores) -> '
             'after the switch 20 (the default)'],
            [f.line({'p1': 'one'}) for f in found])
        self.assertEqual(
            ['nova-manage limits migrate_to_unified_limits --project-id p1 '
             '--region-id R'], qm.commands(found, 'R'))
        self.assertEqual([], qm.compare(
            {'instances': 10}, {'p1': {'instances': 10}}, {'servers': 10},
            {}))
