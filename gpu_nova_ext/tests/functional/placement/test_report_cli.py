# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext report --once`` and ``audit`` as processes, real Placement.

What the operator sees: an incomplete report is not called done (exit 1,
each change not applied named with its reason), each change is printed
once, and the commands that open the state channel print no eventlet
banner.
"""
import collections

import fixtures

from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests.functional.placement import base
from gpu_nova_ext.tests.functional.placement import test_silent_placement

run_cli = test_silent_placement.run_cli


def always_conflict(environ):
    """Another writer wins every generation race, for ever."""
    if environ['REQUEST_METHOD'] == 'PUT' and environ[
            'PATH_INFO'].endswith('/traits'):
        return ('409 Conflict', {'errors': [{
            'status': 409, 'title': 'Conflict',
            'code': 'placement.concurrent_update',
            'detail': 'resource provider generation conflict'}]})
    return None


class TestReportCommand(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        directory = self.useFixture(fixtures.TempDir()).path
        self.conf_file = test_silent_placement.simulated_agent_conf(
            directory, self.placement.endpoint,
            DEFAULT={'transport_url': 'fake://'},
            placement={'max_conflict_retries': '1'})
        self.root = compute_providers.create_compute_node(self.nova, self.HOST)

    def test_persistent_conflicts_are_not_called_done(self):
        self.placement.hooks.append(always_conflict)
        rc, out, err = run_cli(self.conf_file, 'report', '--once')
        self.assertEqual(1, rc, out + err)
        self.assertNotIn('done:', out)
        self.assertIn('INCOMPLETE: 0 change(s) applied', out)
        not_applied = [line for line in out.splitlines()
                       if line.startswith('not applied: ')]
        self.assertTrue(not_applied, out)
        for line in not_applied:
            self.assertIn('traits +CUSTOM_GPU_', line)
            self.assertIn('409', line)
        # and indeed Placement holds none of them
        self.assertFalse(any(t.startswith('CUSTOM_GPU_')
                             for t in self.traits(self.root)))

        # once the other writer is gone, the next run applies them
        self.placement.hooks.clear()
        rc, out, err = run_cli(self.conf_file, 'report', '--once')
        self.assertEqual(0, rc, out + err)
        self.assertIn('done: ', out)
        self.assertIn('CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                      self.traits(self.root))

    def test_each_change_is_printed_once(self):
        rc, out, err = run_cli(self.conf_file, 'report', '--once')
        self.assertEqual(0, rc, out + err)
        changes = [line for line in out.splitlines()
                   if line.startswith(self.HOST + ': traits')]
        self.assertEqual(1, len(changes), out)
        said = collections.Counter(
            line for line in (out + err).splitlines()
            if 'traits +CUSTOM_GPU_' in line)
        self.assertEqual([1], list(said.values()), out + err)

    def test_no_eventlet_banner(self):
        rc, out, err = run_cli(self.conf_file, 'report', '--once', '--cast')
        self.assertEqual(0, rc, out + err)
        self.assertNotIn('Eventlet is deprecated', err)
