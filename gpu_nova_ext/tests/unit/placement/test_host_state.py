# SPDX-License-Identifier: Apache-2.0

"""The host's GPU state on the root provider: names and translation."""
import datetime
import re

import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming
from gpu_nova_ext.placement import translation as t
from gpu_nova_ext.tests.unit.placement import test_translation as tt

NOW = datetime.datetime(2026, 12, 3, 17, 4, 31,
                        tzinfo=datetime.timezone.utc)
STAMP = 'CUSTOM_GPU_HOST_REPORTED_20261203T1704Z'
# Placement's custom trait rule (placement/schemas/trait.py)
CUSTOM_TRAIT = re.compile(r'^CUSTOM_[A-Z0-9_]+$')


def sick(gpu, state):
    gpu.health = base.Health(state=state)
    return gpu


class TestNames(testtools.TestCase):

    def test_host_driver(self):
        self.assertEqual('CUSTOM_GPU_HOST_DRIVER_550',
                         naming.host_driver_trait('550.54.15'))
        self.assertEqual(naming.HOST_DRIVER_UNKNOWN,
                         naming.host_driver_trait(None))
        self.assertEqual('550', naming.host_driver_branch(
            'CUSTOM_GPU_HOST_DRIVER_550'))
        # the GPU providers' driver trait is another trait
        self.assertIsNone(naming.host_driver_branch('CUSTOM_GPU_DRIVER_550'))

    def test_health_round_trip(self):
        for spelling in ('0000:3b:00.0', '00000000:3B:00.0', '3b:00.0'):
            trait = naming.gpu_health_trait('unhealthy', spelling)
            self.assertEqual('CUSTOM_GPU_UNHEALTHY_0000_3B_00_0', trait)
            self.assertEqual(('unhealthy', '0000:3b:00.0'),
                             naming.gpu_health(trait))
        self.assertEqual(('degraded', 'ffff:ff:1f.7'), naming.gpu_health(
            naming.gpu_health_trait('degraded', 'ffff:ff:1f.7')))
        self.assertIsNone(naming.gpu_health_trait('healthy', '3b:00.0'))
        self.assertIsNone(naming.gpu_health('CUSTOM_GPU_UNHEALTHY_X'))

    def test_stamp_round_trip_at_minute_precision(self):
        self.assertEqual(STAMP, naming.host_reported_trait(NOW))
        self.assertEqual(NOW.replace(second=0),
                         naming.host_reported_at(STAMP))
        self.assertIsNone(naming.host_reported_at(
            'CUSTOM_GPU_HOST_REPORTED_YESTERDAY'))

    def test_placement_accepts_them(self):
        for trait in (naming.host_driver_trait('550'),
                      naming.HOST_DRIVER_UNKNOWN,
                      naming.gpu_health_trait('degraded', 'ffff:ff:1f.7'),
                      naming.host_reported_trait(NOW)):
            self.assertRegex(trait, CUSTOM_TRAIT)
            self.assertLessEqual(len(trait), 255)
            self.assertTrue(naming.is_ours(trait))
            self.assertTrue(naming.is_host_state(trait))
        self.assertFalse(naming.is_host_state(naming.HOST_TRAIT))


class TestHostStateTraits(testtools.TestCase):

    def test_branches_health_and_stamp(self):
        gpus = [tt.gpu('0000:3b:00.0'),
                sick(tt.gpu('0000:5e:00.0', driver_version='570.86.10'),
                     'unhealthy'),
                sick(tt.gpu('0000:86:00.0', driver_version=None),
                     'degraded')]
        self.assertEqual({
            'CUSTOM_GPU_HOST_DRIVER_550', 'CUSTOM_GPU_HOST_DRIVER_570',
            naming.HOST_DRIVER_UNKNOWN,
            'CUSTOM_GPU_UNHEALTHY_0000_5E_00_0',
            'CUSTOM_GPU_DEGRADED_0000_86_00_0', STAMP},
            t.host_state_traits(gpus, None, NOW))

    def test_no_gpu_no_trait(self):
        self.assertEqual(frozenset(), t.host_state_traits(
            [], {STAMP, 'CUSTOM_GPU_HOST_DRIVER_550'}, NOW))

    def test_unchanged_state_keeps_its_stamp_until_the_refresh(self):
        gpus = [tt.gpu()]
        refresh = naming.HOST_REPORTED_REFRESH
        first = t.host_state_traits(gpus, {'COMPUTE_NODE'}, NOW)
        later = NOW + refresh - datetime.timedelta(minutes=1)
        self.assertEqual(first, t.host_state_traits(gpus, first, later))
        # an hour on: the agent says it is alive
        renewed = t.host_state_traits(gpus, first, NOW + refresh)
        self.assertEqual(first - {STAMP}, renewed - {
            naming.host_reported_trait(NOW + refresh)})
        self.assertNotIn(STAMP, renewed)

    def test_a_change_renews_the_stamp(self):
        old = t.host_state_traits([tt.gpu()], None,
                                  NOW - datetime.timedelta(minutes=10))
        new = t.host_state_traits([sick(tt.gpu(), 'unhealthy')], old, NOW)
        self.assertIn(STAMP, new)
        self.assertIn('CUSTOM_GPU_UNHEALTHY_0000_3B_00_0', new)

    def test_a_stamp_from_the_future_is_replaced(self):
        ahead = NOW + datetime.timedelta(hours=2)
        current = t.host_state_traits([tt.gpu()], None, ahead)
        self.assertIn(STAMP, t.host_state_traits([tt.gpu()], current, NOW))


class TestOnTheRoot(testtools.TestCase):

    def root_traits(self, gpus, existing_root_traits=frozenset(),
                    now=NOW):
        root = tt.rp(tt.NODE, tt.ROOT, parent=None,
                     traits=frozenset(existing_root_traits))
        pgpu = tt.rp(naming.pgpu_provider_name(tt.NODE, '0000:3b:00.0'),
                     traits=frozenset())
        desired = t.translate(base.HostInventory(host=tt.NODE, gpus=gpus),
                              nodename=tt.NODE, root_uuid=tt.ROOT,
                              existing=[root, pgpu], now=now)
        return tt.by_name(desired)[tt.NODE].traits

    def test_written_beside_the_host_trait(self):
        traits = self.root_traits([sick(tt.gpu(), 'unhealthy')])
        self.assertEqual({naming.HOST_TRAIT, 'CUSTOM_GPU_HOST_DRIVER_550',
                          'CUSTOM_GPU_UNHEALTHY_0000_3B_00_0', STAMP},
                         set(traits))

    def test_stale_ones_are_removed_others_kept(self):
        old = {'COMPUTE_NODE', 'CUSTOM_RACK_A',
               'CUSTOM_GPU_RESERVED_6F70', 'CUSTOM_GPU_HOST_DRIVER_535',
               'CUSTOM_GPU_UNHEALTHY_0000_3B_00_0',
               'CUSTOM_GPU_HOST_REPORTED_20261203T1600Z'}
        desired = self.root_traits([tt.gpu()], old)
        self.assertEqual(
            {'COMPUTE_NODE', 'CUSTOM_RACK_A', 'CUSTOM_GPU_RESERVED_6F70',
             naming.HOST_TRAIT, 'CUSTOM_GPU_HOST_DRIVER_550', STAMP},
            set(t.merge_traits(old, desired)))

    def test_a_steady_root_wants_what_it_has(self):
        first = self.root_traits([tt.gpu()])
        later = NOW + datetime.timedelta(minutes=30)
        self.assertEqual(first, self.root_traits([tt.gpu()], first, later))
