# SPDX-License-Identifier: Apache-2.0

"""The pure parts of ``openstack gpu explain``: what to explain, Placement's
shortfall from the snapshot's facts, a filter's removal in words.  The
simulation itself: tests/functional/nova/test_osc_explain.py."""
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import explain
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.simulate import nova_filter_handlers
from gpu_nova_ext.simulate import scheduling

RC = 'CUSTOM_VGPU_A100_80GB_PCIE'
FLAVOR = cloud_facts.FlavorFact(name='a100', vcpus=4, ram=1024, disk=1,
                                extra_specs={'resources:%s' % RC: '1'})


def facts(*, vcpu_used=0, gpu_used=0, root_traits=(), servers=()):
    root = audit.ProviderView(uuid='r1', name='h1', root_uuid='r1',
                              traits=list(root_traits))
    gpu = audit.ProviderView(
        uuid='g1', name='h1_pci_0000_3b_00_0', root_uuid='r1',
        parent_uuid='r1', traits=['CUSTOM_GPU_MODEL_A100_80GB_PCIE'],
        inventories={RC: {'total': 2, 'reserved': 0}},
        usages={RC: gpu_used})
    return cloud_facts.CloudFacts(
        providers=[root, gpu],
        root_inventories={'r1': {'VCPU': {'total': 8, 'reserved': 0,
                                          'allocation_ratio': 2.0}}},
        root_usages={'r1': {'VCPU': vcpu_used}}, servers=list(servers),
        flavors=[FLAVOR], aggregates={})


def asked(**kw):
    kw.setdefault('resources', {'VCPU': 4, RC: 1})
    return scheduling.Explanation(**kw)


class TestPlacementShortfall(testtools.TestCase):

    def test_the_short_resource(self):
        self.assertEqual('VCPU: 2 free, 4 asked', explain.placement_shortfall(
            facts(vcpu_used=14), 'r1', asked()))
        self.assertEqual('%s: 0 free, 1 asked' % RC,
                         explain.placement_shortfall(
                             facts(gpu_used=2), 'r1', asked()))
        self.assertEqual('no MEMORY_MB inventory (512 asked)',
                         explain.placement_shortfall(
                             facts(), 'r1', asked(resources={
                                 'MEMORY_MB': 512})))

    def test_traits(self):
        self.assertEqual(
            'required trait CUSTOM_X on none of its providers',
            explain.placement_shortfall(facts(), 'r1', asked(
                required_traits={'CUSTOM_X',
                                 'CUSTOM_GPU_MODEL_A100_80GB_PCIE'})))
        self.assertEqual('its compute service is disabled',
                         explain.placement_shortfall(
                             facts(root_traits=['COMPUTE_STATUS_DISABLED']),
                             'r1', asked(forbidden_traits={
                                 'COMPUTE_STATUS_DISABLED'})))

    def test_nothing_short_says_what_else(self):
        self.assertIn('the request asks for Placement aggregates a,b ',
                      explain.placement_shortfall(facts(), 'r1', asked(
                          member_of=[['a', 'b']])))
        self.assertIn('max_placement_results=10',
                      explain.placement_shortfall(facts(), 'r1', asked(
                          candidates=10, limit=10)))
        self.assertIn('a request group needs them from one provider',
                      explain.placement_shortfall(facts(), 'r1', asked()))


class TestWords(testtools.TestCase):

    def test_removal_names_the_cloud_s_addresses(self):
        removal = nova_filter_handlers.Removal(
            filter='GpuHealthFilter', need='health healthy',
            failing=[(['0000:10:00.0'], 'unhealthy')])
        self.assertEqual(
            'needs health healthy; GPU 0000:81:00.0: unhealthy',
            explain.removal_reason(removal,
                                   {'0000:10:00.0': '0000:81:00.0'}))

    def test_fact_words_per_family(self):
        text = nova_filter_handlers._fact_text
        self.assertEqual('model L4 (nvidia, vgpu, vGPU type a,b)',
                         text('model', ('nvidia', 'L4', 'vgpu',
                                        frozenset({'b', 'a'}))))
        self.assertEqual('degraded', text('health', 1))
        self.assertEqual('reserved for project p1',
                         text('reservation', 'p1'))
        self.assertEqual('CUDA 8.0, driver ?',
                         text('capability', ((8, 0), None)))


class TestRequest(testtools.TestCase):

    def test_server_request_is_its_own_flavor_and_project(self):
        server = cloud_facts.ServerFact(
            id='s-id', name='s', host=None, status='ERROR',
            project_id='p1', created_at='2026',
            flavor={'name': 'gone', 'vcpus': 2, 'ram': 512, 'disk': 3,
                    'extra_specs': {'resources:VGPU': '1'}})
        cloud = facts(servers=[server])
        request = explain.request_of_server(cloud, 's', None)
        self.assertEqual(('gone', 2, 512, 3, {'resources:VGPU': '1'}, 'p1'),
                         (request.flavor.name, request.flavor.vcpus,
                          request.flavor.ram, request.flavor.disk,
                          request.flavor.extra_specs, request.project))
        self.assertEqual('p2', explain.request_of_server(
            cloud, 's-id', 'p2').project)
        self.assertEqual([], explain.without_server(cloud, server).servers)

    def test_bad_input_one_line(self):
        cloud = facts()
        exc = self.assertRaises(exception.InvalidArgument,
                                explain.request_of_server, cloud, 'x', None)
        self.assertIn('no such server in Nova', str(exc))
        exc = self.assertRaises(exception.InvalidArgument,
                                explain.request_of_flavor, cloud, 'x', None)
        self.assertIn('no such flavor in Nova (flavors: a100)', str(exc))

    def test_the_flavor_keeps_its_name_unless_it_differs(self):
        snap = snapshot.build(facts(), 'now')
        _data, name = explain.scenario_of(snap, FLAVOR)
        self.assertEqual('a100', name)
        edited = cloud_facts.FlavorFact(name='a100', vcpus=8, ram=1024, disk=1,
                                        extra_specs=FLAVOR.extra_specs)
        data, name = explain.scenario_of(snap, edited)
        self.assertEqual(explain.REQUEST_FLAVOR, name)
        self.assertEqual(8, data['flavors'][-1]['vcpus'])
        # no server to replay: a step that does nothing
        self.assertEqual([{'delete': explain.REQUEST_FLAVOR}], data['boots'])
        self.assertNotIn('workload', data)
