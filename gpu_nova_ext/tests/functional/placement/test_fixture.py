# SPDX-License-Identifier: Apache-2.0

"""The reporter against Placement's own in-process fixture.

``placement.tests.functional.fixtures.placement.PlacementFixture`` sets up
the configuration and an in-memory database; the app is reached through
wsgi-intercept (no socket), with our counting middleware in front of it so
writes are counted at the server.
"""
import fixtures
from oslo_utils import uuidutils
from oslotest import base as oslotest_base
from placement import deploy
from placement.tests.functional.fixtures import placement as pfixture
from wsgi_intercept import interceptor

from gpu_nova_ext import naming
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import reporter as preporter
from gpu_nova_ext.simulate import compute_providers
from gpu_nova_ext.simulate import embedded
from gpu_nova_ext.tests.functional.placement import base


class TestWithPlacementFixture(oslotest_base.BaseTestCase):

    def setUp(self):
        super().setUp()
        fixture = self.useFixture(pfixture.PlacementFixture(
            use_intercept=False))
        self.counter = embedded.CountingMiddleware(
            deploy.loadapp(fixture.conf_fixture.conf))
        endpoint = 'http://%s/placement' % uuidutils.generate_uuid()

        def app():
            return self.counter

        intercept = interceptor.RequestsInterceptor(app, url=endpoint)
        intercept.install_intercept()
        self.addCleanup(intercept.uninstall_intercept)
        tmp = self.useFixture(fixtures.TempDir()).path
        self.conf = base.load_conf(base.write_conf(tmp, endpoint, 'cmp-9'))

    def test_report_pgpu_and_pci_hosts(self):
        nova = pclient.PlacementClient(self.conf)
        root = compute_providers.create_compute_node(nova, 'cmp-9')
        pgpu = compute_providers.create_pgpu_provider(nova, 'cmp-9', root,
                                                      '0000:3b:00.0', 4)
        pci = compute_providers.create_pci_provider(nova, 'cmp-9', root,
                                                    '0000:5e:00.0')
        inv = base.make_inventory('cmp-9', ['0000:3b:00.0'])
        inv.gpus += base.make_inventory('cmp-9', ['0000:5e:00.0'],
                                        mode='passthrough').gpus
        reporter = preporter.Reporter(self.conf,
                                      pclient.PlacementClient(self.conf))
        self.counter.reset()
        result = reporter.report(inv)
        self.assertEqual(self.counter.writes, result.writes)
        self.assertGreater(result.writes, 0)
        traits = set(nova.get('/resource_providers/%s/traits'
                              % pgpu)['traits'])
        self.assertIn('CUSTOM_GPU_MODEL_A100_80GB_PCIE', traits)
        pci_traits = set(nova.get('/resource_providers/%s/traits'
                                  % pci)['traits'])
        self.assertFalse({t for t in pci_traits if naming.is_ours(t)})
        self.assertEqual([pgpu], inv.gpus[0].provider_uuids)
        self.assertEqual([pci], inv.gpus[1].provider_uuids)

        self.counter.reset()
        reporter.report(inv)
        self.assertEqual(0, self.counter.writes, self.counter.write_log)
