# SPDX-License-Identifier: Apache-2.0

"""``audit --energy-window``: a real Placement, a real agent exporter.

The window's wait is where the agent's ledger moves on: the test replaces
the command's wait with that step, so nothing depends on wall time.
"""
import json

import fixtures

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.tests.functional import osc_client
from gpu_nova_ext.tests.functional.placement import base

VM1 = '0c3a7f52-1d2e-4b8a-9f61-3e2d1c0b9a01'
VM2 = '0c3a7f52-1d2e-4b8a-9f61-3e2d1c0b9a02'
BUS = '00000000:3B:00.0'


class TestAuditEnergy(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.root, pgpus = self.vgpu_host(1)
        compute_providers.claim(self.nova, VM1, {pgpus[base.addresses(1)[0]]: {
            'VGPU': 1}}, project_id='proj-a')
        self.exporter = exporter.Exporter(self.HOST, '127.0.0.1', 0)
        self.exporter.start()
        self.addCleanup(self.exporter.stop)
        self.exporter.set_server_energy({VM1: (BUS, 100.0)})
        self.exporter.update([])

        def window(seconds):
            self.waited = seconds
            self.exporter.set_server_energy({VM1: (BUS, 350.0),
                                             VM2: (BUS, 50.0)})
            self.exporter.update([])

        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.osc.audit.wait_window', window))
        self.useFixture(osc_client.Cloud(self.placement.endpoint))

    def audit(self, *extra):
        rc, out, err = osc_client.openstack(
            'gpu', 'audit', '--energy-window', '30', '--exporter',
            '%s=http://127.0.0.1:%d/metrics' % (
                self.HOST, self.exporter.port), *extra)
        return rc, out

    def test_per_server_and_project(self):
        rc, out = self.audit('--exporter', 'cmp-9=http://127.0.0.1:1/m',
                             '-f', 'json')
        self.assertEqual(0, rc)
        self.assertEqual(30.0, self.waited)
        report = json.loads(out)
        self.assertEqual([(VM1, 'proj-a', 250.0),
                          (VM2, '(no allocations: deleted?)', 50.0)],
                         [(s['server'], s['project'], s['joules'])
                          for s in report['servers']])
        self.assertEqual(250.0, report['projects']['proj-a']['joules'])
        self.assertEqual(1, len(report['warnings']))
        self.assertIn('host cmp-9: exporter http://127.0.0.1:1/m not read',
                      report['warnings'][0])

    def test_table(self):
        rc, out = self.audit()
        self.assertEqual(0, rc)
        self.assertIn('window_s', out)
        self.assertIn(VM1, out)
        self.assertIn('proj-a', out)

    def test_bad_window_refused(self):
        rc, out, err = osc_client.openstack('gpu', 'audit',
                                            '--energy-window', '-1')
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.splitlines()), err)
        self.assertIn('--energy-window', err)
