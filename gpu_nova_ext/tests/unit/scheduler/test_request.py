# SPDX-License-Identifier: Apache-2.0

"""gpu: extra spec parsing and GPU-request detection."""
import json

from nova import objects

from gpu_nova_ext.scheduler import context as sched_context
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no


def _parse(key, value):
    return request.KEYS[key].parse(value)


class TestValueParsers(base.PluginTestCase):

    def test_memory(self):
        self.assertEqual(16384, _parse('gpu:memory_min', '16384'))
        self.assertEqual(16384, _parse('gpu:memory_min', '16GB'))
        self.assertEqual(16384, _parse('gpu:memory_min', '16 GiB'))
        self.assertEqual(512, _parse('gpu:memory_min', '512MiB'))
        self.assertEqual(512, _parse('gpu:memory_min', '512mb'))
        for bad in ('', '16TB', '-1', '1.5GB', 'GB', '16 G'):
            self.assertRaises(ValueError, _parse, 'gpu:memory_min', bad)

    def test_models(self):
        self.assertEqual(('A100', 'H100_SXM5'),
                         _parse('gpu:model', 'A100, nvidia h100-sxm5'))
        for bad in ('', 'A100,,H100', ',', '!x'):
            self.assertRaises(ValueError, _parse, 'gpu:model', bad)

    def test_versions(self):
        self.assertEqual((8, 0), _parse('gpu:cuda_cc_min', '8.0'))
        self.assertEqual((12, 10), _parse('gpu:cuda_cc_min', '12.10'))
        for bad in ('8', '8.0.1', 'x.y', ''):
            self.assertRaises(ValueError, _parse, 'gpu:cuda_cc_min', bad)
        self.assertEqual((550, 54, 15), _parse('gpu:driver_min', '550.54.15'))
        self.assertEqual((550,), _parse('gpu:driver_min', '550'))
        for bad in ('550.', 'r550', '', '1.2.3.4.5'):
            self.assertRaises(ValueError, _parse, 'gpu:driver_min', bad)

    def test_registry(self):
        import dataclasses
        import importlib.metadata
        fields = {f.name for f in dataclasses.fields(request.GpuRequest)}
        filters = {ep.name for ep in importlib.metadata.entry_points(
            group='gpu_nova_ext.scheduler.filters')}
        for key in request.KEYS.values():
            self.assertTrue(key.name.startswith(request.PREFIX))
            self.assertIn(key.field, fields)
            self.assertIn(key.filter, filters)
            self.assertTrue(key.help)
            # a key is enumerated or has a pattern with samples of it
            self.assertNotEqual(bool(key.values), bool(key.pattern))
            for value in key.choices or key.examples:
                self.assertIsNotNone(key.parse(value))
        # the value lists other modules import are the registry's
        self.assertEqual(request.MODES, request.KEYS['gpu:mode'].choices)
        self.assertEqual(request.POLICIES,
                         request.KEYS['gpu:intra_host_policy'].choices)
        self.assertIn('fragmentation', request.POLICIES)
        self.assertEqual({'healthy': 0, 'degraded_ok': 1, 'any': 2},
                         request.HEALTH_MAX_RANK)
        self.assertEqual(('models', 'vendor', 'mode', 'vgpu_types',
                          'memory_min_mib', 'cuda_cc_min', 'driver_min',
                          'power_profile'), request.CONSTRAINT_FIELDS)

    def test_enums(self):
        self.assertEqual('nvidia', _parse('gpu:vendor', 'nvidia'))
        self.assertRaises(ValueError, _parse, 'gpu:vendor', 'matrox')
        self.assertEqual('vgpu', _parse('gpu:mode', 'vgpu'))
        self.assertRaises(ValueError, _parse, 'gpu:mode', 'mig')
        self.assertEqual('degraded_ok', _parse('gpu:health', 'degraded_ok'))
        self.assertRaises(ValueError, _parse, 'gpu:health', 'sick')
        self.assertEqual('least_loaded',
                         _parse('gpu:intra_host_policy', 'least_loaded'))
        self.assertRaises(ValueError, _parse, 'gpu:intra_host_policy',
                          'random')

    def test_one_value_rule_with_the_api(self):
        # issue 16.5: nova-api refused these and the scheduler took them
        from nova.api.validation.extra_specs import validators
        from nova import exception
        for key, value in (('gpu:vendor', 'NVIDIA'), ('gpu:mode', 'VGPU'),
                           ('gpu:health', 'HEALTHY'),
                           ('gpu:intra_host_policy', 'Spread'),
                           ('gpu:health', 'degraded_ok ')):
            self.assertRaises(exception.ValidationError,
                              validators.validate, key, value)
            req = request.parse_extra_specs({key: value})
            self.assertEqual([key], [e.key for e in req.errors])
        for key, value in (('gpu:vendor', 'nvidia'), ('gpu:memory_min',
                                                      ' 16 GB ')):
            validators.validate(key, value)
            self.assertEqual((), request.parse_extra_specs(
                {key: value}).errors)

    def test_misspelt_namespace(self):
        from nova.api.validation.extra_specs import validators
        from nova import exception
        for key in ('GPU:model', 'Gpu:Model', ' gpu:model', 'gpu :model'):
            req = request.parse_extra_specs({key: 'H100'})
            self.assertEqual(request.GPU, req.kind)
            self.assertEqual(1, len(req.errors))
            self.assertIn('write gpu:model', req.errors[0].reason)
            exc = self.assertRaises(exception.ValidationError,
                                    validators.validate, key, 'H100')
            self.assertIn("'gpu:model'", str(exc))
        self.assertEqual(request.NONE, request.parse_extra_specs(
            {'gpus:model': 'x', 'hw:cpu_policy': 'dedicated'}).kind)

    def test_constrained(self):
        def constrained(specs):
            return request.parse_extra_specs(specs).constrained
        self.assertFalse(constrained({'resources:VGPU': '1'}))
        self.assertFalse(constrained({'resources:VGPU': '1',
                                      'gpu:intra_host_policy': 'spread'}))
        self.assertFalse(constrained({'gpu:health': 'any'}))
        self.assertTrue(constrained({'gpu:health': 'healthy'}))
        self.assertTrue(constrained({'gpu:model': 'A100'}))
        self.assertTrue(constrained({'gpu:memory_min': '16GB'}))


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
        self.assertEqual(request.GPU, req.kind)
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
        self.assertEqual(request.GPU, request.from_request_spec(spec).kind)
        spec = no.request_spec({'pci_passthrough:alias': 'nic:1'})
        del spec.pci_requests
        self.assertEqual(request.NONE,
                         request.from_request_spec(spec).kind)

    def test_pci_requests_of_the_spec(self):
        spec = no.request_spec({})
        spec.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(count=1, alias_name='gpu', spec=[
                {'vendor_id': '1002', 'product_id': '740f'}])])
        self.assertEqual(request.GPU, request.from_request_spec(spec).kind)

    def test_context_is_parsed_once_per_request(self):
        spec = no.request_spec({'gpu:model': 'A100'})
        ctx = sched_context.request_context(spec)
        # the same RequestSpec object: the same request, whatever the time
        self.now += 3600
        self.assertIs(ctx, sched_context.request_context(spec))
        # another RequestSpec (Nova's next request) parses again
        other = no.request_spec({'gpu:model': 'A100'})
        self.assertIsNot(ctx, sched_context.request_context(other))
        # a resize swaps the flavor
        spec.flavor = no.request_spec({'gpu:model': 'H100'}).flavor
        self.assertEqual(('H100',),
                         sched_context.request_context(spec).request.models)

    def test_context_goes_with_the_request_spec(self):
        import gc
        import weakref
        spec = no.request_spec({'gpu:model': 'A100'})
        ctx = weakref.ref(sched_context.request_context(spec))
        self.assertIsNotNone(ctx())
        del spec
        gc.collect()
        self.assertIsNone(ctx())

    def test_nothing_is_set_on_nova_objects(self):
        spec = no.request_spec({'gpu:model': 'A100'})
        host = no.host_state('h1', allocation_candidates=no.candidates(
            'h1', [0, 1]))
        self.add_host('h1', [no.gpu_state('h1', i) for i in range(2)])
        before_spec, before_host = dict(vars(spec)), dict(vars(host))
        from gpu_nova_ext.scheduler.filters import facts
        from gpu_nova_ext.scheduler.weighers import capacity
        no.run_filters([facts.GpuModelFilter()], [host], spec)
        no.weigh([capacity.GpuPackingWeigher()], [host, no.host_state(
            'h2')], spec)
        self.assertEqual(set(before_spec), set(vars(spec)))
        self.assertEqual(set(before_host), set(vars(host)))
