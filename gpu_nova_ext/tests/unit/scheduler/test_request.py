"""gpu: extra spec parsing and GPU-request detection."""
import json

from nova import objects

from gpu_nova_ext.scheduler import base as sched_base
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


class TestValueParsers(base.PluginTestCase):

    def test_memory(self):
        self.assertEqual(16384, request.parse_memory('16384'))
        self.assertEqual(16384, request.parse_memory('16GB'))
        self.assertEqual(16384, request.parse_memory('16 GiB'))
        self.assertEqual(512, request.parse_memory('512MiB'))
        self.assertEqual(512, request.parse_memory('512mb'))
        for bad in ('', '16TB', '-1', '1.5GB', 'GB', '16 G'):
            self.assertRaises(ValueError, request.parse_memory, bad)

    def test_models(self):
        self.assertEqual(('A100', 'H100_SXM5'),
                         request.parse_models('A100, nvidia h100-sxm5'))
        for bad in ('', 'A100,,H100', ',', '!x'):
            self.assertRaises(ValueError, request.parse_models, bad)

    def test_versions(self):
        self.assertEqual((8, 0), request.parse_cuda_cc('8.0'))
        self.assertEqual((12, 10), request.parse_cuda_cc('12.10'))
        for bad in ('8', '8.0.1', 'x.y', ''):
            self.assertRaises(ValueError, request.parse_cuda_cc, bad)
        self.assertEqual((550, 54, 15), request.parse_driver('550.54.15'))
        self.assertEqual((550,), request.parse_driver('550'))
        for bad in ('550.', 'r550', '', '1.2.3.4.5'):
            self.assertRaises(ValueError, request.parse_driver, bad)

    def test_enums(self):
        self.assertEqual('nvidia', request.parse_vendor('NVIDIA'))
        self.assertRaises(ValueError, request.parse_vendor, 'matrox')
        self.assertEqual('vgpu', request.parse_mode('vgpu'))
        self.assertRaises(ValueError, request.parse_mode, 'mig')
        self.assertEqual('degraded_ok', request.parse_health('degraded_ok'))
        self.assertRaises(ValueError, request.parse_health, 'sick')
        self.assertEqual('least_loaded', request.parse_policy('least_loaded'))
        self.assertRaises(ValueError, request.parse_policy, 'random')


class TestDetection(base.PluginTestCase):

    def kind(self, extra_specs, **kwargs):
        return request.parse_extra_specs(extra_specs, **kwargs).kind

    def test_resource_classes(self):
        self.assertEqual(request.GPU, self.kind({'resources:VGPU': '1'}))
        self.assertEqual(request.GPU, self.kind({'resources1:PGPU': '1'}))
        self.assertEqual(request.GPU, self.kind(
            {'resources_gpu:CUSTOM_GPU_A100_80GB_PCIE': '2'}))
        self.assertEqual(request.GPU, self.kind(
            {'resources:CUSTOM_PCI_10DE_20B5': '1'}))
        self.assertEqual(request.MAYBE, self.kind(
            {'resources:CUSTOM_NVIDIA_471': '1'}))
        self.assertEqual(request.NONE, self.kind(
            {'resources:VCPU': '4', 'resources:VGPU': '0',
             'hw:cpu_policy': 'dedicated'}))
        self.assertEqual(request.NONE, self.kind({}))

    def test_gpu_key_alone(self):
        req = request.parse_extra_specs({'gpu:model': 'A100'})
        self.assertTrue(req.is_gpu)
        self.assertEqual(('A100',), req.models)
        self.assertEqual('healthy', req.health)

    def test_pci_specs(self):
        self.assertEqual(request.GPU, self.kind(
            {}, pci_specs=[{'vendor_id': '10de', 'product_id': '20b5'}]))
        self.assertEqual(request.GPU, self.kind(
            {}, pci_specs=[{'resource_class': 'CUSTOM_GPU_A100'}]))
        self.assertEqual(request.MAYBE, self.kind(
            {}, pci_specs=[{'vendor_id': '8086', 'product_id': '56c0'}]))
        self.assertEqual(request.NONE, self.kind(
            {}, pci_specs=[{'vendor_id': '15b3', 'product_id': '101e'}]))

    def test_port_resource_groups(self):
        self.assertEqual(request.NONE, self.kind(
            {}, resource_classes=['NET_BW_EGR_KILOBIT_PER_SEC']))
        self.assertEqual(request.GPU, self.kind(
            {}, resource_classes=['VGPU']))

    def test_errors_are_collected_per_filter(self):
        req = request.parse_extra_specs({
            'gpu:memory_min': 'big', 'gpu:bogus': '1', 'gpu:model': 'A100'})
        self.assertEqual(('A100',), req.models)
        self.assertEqual(['gpu:memory_min'],
                         [e.key for e in req.errors_for('GpuMemoryFilter')])
        self.assertEqual(['gpu:bogus'],
                         [e.key for e in req.errors_for('GpuModelFilter')])
        self.assertEqual((), req.errors_for('GpuHealthFilter'))


class TestRequestSpec(base.PluginTestCase):

    def test_pci_alias_from_nova_conf(self):
        self.flags(alias=[json.dumps({'name': 'a100', 'vendor_id': '10de',
                                      'product_id': '20b5'}),
                          json.dumps({'name': 'nic', 'vendor_id': '15b3',
                                      'product_id': '101e'})],
                   group='pci')
        spec = no.request_spec({'pci_passthrough:alias': 'a100:2'})
        spec.obj_reset_changes()
        del spec.pci_requests
        self.assertTrue(request.from_request_spec(spec).is_gpu)
        spec = no.request_spec({'pci_passthrough:alias': 'nic:1'})
        del spec.pci_requests
        self.assertEqual(request.NONE,
                         request.from_request_spec(spec).kind)

    def test_pci_requests_of_the_spec(self):
        spec = no.request_spec({})
        spec.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(count=1, alias_name='gpu', spec=[
                {'vendor_id': '1002', 'product_id': '740f'}])])
        self.assertTrue(request.from_request_spec(spec).is_gpu)

    def test_context_is_parsed_once_per_request(self):
        spec = no.request_spec({'gpu:model': 'A100'})
        ctx = sched_base.request_context(spec)
        self.assertIs(ctx, sched_base.request_context(spec))
        # a later pass (another scheduling attempt) parses again
        self.now += sched_base.CONTEXT_MAX_AGE + 1
        self.assertIsNot(ctx, sched_base.request_context(spec))
        # a resize swaps the flavor
        ctx = sched_base.request_context(spec)
        spec.flavor = no.request_spec({'gpu:model': 'H100'}).flavor
        self.assertEqual(('H100',),
                         sched_base.request_context(spec).request.models)
