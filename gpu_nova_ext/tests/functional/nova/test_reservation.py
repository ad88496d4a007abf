# SPDX-License-Identifier: Apache-2.0

"""GPU reservations end to end in Nova's harness (issue 20.3).

Two vGPU hosts (two A100 pGPUs each), our filters and weighers enabled
with Nova's AggregateMultiTenancyIsolation; ``openstack gpu reservation``
through python-openstackclient (:mod:`.osc_client`); servers booted by
two projects through Nova's API.
"""
from nova.tests.functional.api import client as api_client

from gpu_nova_ext import naming
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional import osc_client

VGPU = {'resources:VGPU': '1'}
# the harness's own project is A; B is another Keystone-style id
PROJECT_B = 'b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0b0'


class ReservationTest(base.GpuVGPUTestBase):

    ADDITIONAL_FILTERS = base.GPU_FILTERS + ['AggregateMultiTenancyIsolation']

    def setUp(self):
        super().setUp()
        for host in ('h1', 'h2'):
            self.start_gpu_host(host, {base.PGPU0: base.gpu(base.A100),
                                       base.PGPU1: base.gpu(base.A100)})
        self.useFixture(osc_client.Cloud.of_harness(self))
        self.project_a = self.api.project_id
        # an admin of project B (the tests ask for hosts, as admins may)
        self.api_b = api_client.TestOpenStackClient(
            'admin', self.api_fixture.base_url, project_id=PROJECT_B,
            roles=['reader', 'member', 'admin'])
        self.api_b.microversion = self.api.microversion

    def reserve(self, *argv, action='create'):
        """``openstack gpu reservation create ARGV``: (0, stdout)."""
        rc, out, err = osc_client.openstack('gpu', 'reservation', action,
                                            *argv)
        self.assertEqual(0, rc, err)
        return rc, out

    def unreserve(self, *argv):
        return self.reserve(*argv, action='delete')

    def refused(self, *argv) -> str:
        """A reservation that must be refused: its one error line."""
        return osc_client.refused(self, 'gpu', 'reservation', 'create',
                                  *argv)

    def listed(self):
        return osc_client.openstack_json(self, 'gpu', 'reservation', 'list')

    def boot_as(self, api, expected_state='ACTIVE', host=None):
        flavor = self._create_flavor(extra_spec=VGPU, memory_mb=512,
                                     vcpu=1, disk=1)
        saved, self.api = self.api, api
        try:
            return self._create_server(
                image_uuid=base.IMAGE, flavor_id=flavor, networks='none',
                host=host, expected_state=expected_state, api=api)
        finally:
            self.api = saved

    def test_reserved_gpu_goes_to_its_project_first_never_to_another(self):
        reserved = ('h1', self.pgpu('h1', base.PGPU0))
        rc, out = self.reserve('--project', self.project_a,
                               '--host', 'h1', '--gpu', base.PGPU0)
        self.assertEqual(0, rc)
        self.assertIn('reserved GPU %s on h1 for project %s'
                      % (base.PGPU0, self.project_a), out)
        # no Keystone in the harness: said, not hidden
        self.assertIn('not checked in Keystone', out)
        self.assertIn('GpuReservationFilter', out)
        state = self.run_agent('h1')
        self.assertEqual([self.project_a, None],
                         [g.get('reserved_for') for g in state['gpus']])

        # B, sent to h1 where both GPUs are empty: without the filter the
        # first GPU in address order (the reserved one) would be chosen
        for _ in range(2):
            server = self.boot_as(self.api_b, host='h1')
            self.assertEqual(('h1', self.pgpu('h1', base.PGPU1)),
                             self.gpu_of(server))
            self.run_agent('h1')
        server = self.boot_as(self.api_b)
        self.assertNotEqual(reserved, self.gpu_of(server))
        self.run_agent(server['OS-EXT-SRV-ATTR:host'])
        # A: binpacking alone would choose the busiest pGPU (h1's second);
        # its reserved GPU comes first
        server = self.boot_as(self.api)
        self.assertEqual(reserved, self.gpu_of(server))

        # listed, then removed: B may use it again
        [entry] = self.listed()
        self.assertEqual(
            {'project': self.project_a, 'host': 'h1', 'gpu': base.PGPU0,
             'model': 'A100_80GB_PCIE', 'mechanism': 'trait'},
            {k: entry[k] for k in ('project', 'host', 'gpu', 'model',
                                   'mechanism')})
        rc, out = self.unreserve('--project', self.project_a,
                                 '--host', 'h1', '--gpu', base.PGPU0)
        self.assertIn('unreserved GPU %s on h1' % base.PGPU0, out)
        state = self.run_agent('h1')
        self.assertEqual([None, None],
                         [g.get('reserved_for') for g in state['gpus']])

    def test_whole_host_reserved_through_an_aggregate(self):
        rc, out = self.reserve('--project', self.project_a,
                               '--host', 'h2')
        self.assertEqual(0, rc)
        self.assertIn('created aggregate gpu-reserved-%s' % self.project_a,
                      out)
        self.assertIn('AggregateMultiTenancyIsolation', out)
        # B cannot land on h2, even when asking for it
        self.boot_as(self.api_b, host='h2', expected_state='ERROR')
        server = self.boot_as(self.api_b)
        self.assertEqual('h1', self.gpu_of(server)[0])
        self.run_agent('h1')
        # A goes to its host, though binpacking prefers h1 now
        server = self.boot_as(self.api)
        self.assertEqual('h2', self.gpu_of(server)[0])

        [entry] = self.listed()
        self.assertEqual(('aggregate gpu-reserved-%s' % self.project_a,
                          None), (entry['mechanism'], entry['gpu']))
        # the host is another project's now: refused, the owner named
        exc = self.refused('--project', PROJECT_B,
                           '--host', 'h2')
        self.assertIn('kept for project %s' % self.project_a, str(exc))
        rc, out = self.unreserve('--project', self.project_a,
                                 '--host', 'h2')
        self.assertIn('deleted the empty aggregate', out)
        self.assertEqual([], self.listed())

    def test_named_aggregate(self):
        agg = self.admin_api.post_aggregate({'aggregate': {'name': 'train'}})
        self.admin_api.add_host_to_aggregate(agg['id'], 'h1')
        rc, out = self.reserve('--project', self.project_a,
                               '--aggregate', 'train')
        self.assertIn('reserved aggregate train (1 host(s): h1) for project '
                      '%s' % self.project_a, out)
        self.assertEqual({'filter_tenant_id': self.project_a},
                         self.admin_api.api_get(
                             '/os-aggregates/%s' % agg['id']).body[
                                 'aggregate']['metadata'])
        self.boot_as(self.api_b, host='h1', expected_state='ERROR')
        # another project's: refused, then moved with --force
        exc = self.refused('--project', PROJECT_B,
                           '--aggregate', 'train')
        self.assertIn('it is kept for project %s' % self.project_a,
                      str(exc))
        rc, out = self.reserve('--project', PROJECT_B,
                               '--aggregate', 'train', '--force')
        self.assertIn('(taken from project %s: --force)' % self.project_a,
                      out)
        server = self.boot_as(self.api_b, host='h1')
        self.assertEqual('h1', self.gpu_of(server)[0])
        rc, out = self.unreserve('--project', PROJECT_B,
                                 '--aggregate', 'train')
        self.assertIn('unreserved aggregate train', out)
        self.assertEqual({}, self.admin_api.api_get(
            '/os-aggregates/%s' % agg['id']).body['aggregate']['metadata'])

    def test_bad_input_names_the_fix(self):
        exc = self.refused('--project', self.project_a, '--host', 'h9',
                           '--gpu', base.PGPU0)
        self.assertIn("No host 'h9'", str(exc))
        exc = self.refused('--project', self.project_a, '--host', 'h9')
        self.assertIn("No host 'h9' in Nova's compute services", str(exc))
        exc = self.refused('--project', self.project_a,
                           '--host', 'h1', '--gpu', '0000:99:00.0')
        self.assertIn('Placement has no GPU provider for it', str(exc))
        exc = self.refused('--project', 'no such',
                           '--host', 'h1')
        self.assertIn('--project', str(exc))
        self.reserve('--project', PROJECT_B, '--host', 'h1',
                     '--gpu', base.PGPU1)
        exc = self.refused('--project', self.project_a,
                           '--host', 'h1', '--gpu', base.PGPU1)
        self.assertIn('it is reserved for project %s' % PROJECT_B, str(exc))
        exc = self.refused('--project', self.project_a,
                           '--aggregate', 'nosuch')
        self.assertIn('Nova has no such host aggregate', str(exc))
        self.assertIn(naming.reservation_trait(PROJECT_B), self.placement.get(
            '/resource_providers/%s/traits' % self._rp('h1', base.PGPU1),
            version='1.6').body['traits'])

    def _rp(self, host, address):
        name = self.pgpu(host, address)
        return self.placement.get('/resource_providers?name=%s'
                                  % name).body['resource_providers'][0][
                                      'uuid']
