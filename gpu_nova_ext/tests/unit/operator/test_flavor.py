# SPDX-License-Identifier: Apache-2.0

"""GPU flavor extra specs: Nova's keys, ours, and the CLI's dry run."""
import json

from nova.api.validation.extra_specs import pci_passthrough
from nova.api.validation.extra_specs import resources
from nova.api.validation.extra_specs import traits
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.functional import osc_client

# Nova's validators of the namespaces we write (loaded one by one: Nova's
# registry would load every installed namespace, ours included).
NOVA_VALIDATORS = (resources.register() + traits.register()
                   + pci_passthrough.register())


def specs(**kw):
    kw.setdefault('model', 'A100_80GB_PCIE')
    return flavor.extra_specs(flavor.GpuFlavorRequest(**kw))


class TestExtraSpecs(testtools.TestCase):

    def test_mdev_vgpu_per_model_class(self):
        self.assertEqual(
            {'resources:CUSTOM_VGPU_A100_80GB_PCIE': '1',
             'gpu:model': 'A100_80GB_PCIE', 'gpu:mode': 'vgpu',
             'gpu:vgpu_type': 'A100D-10C', 'gpu:memory_min': '10GB'},
            specs(vgpu_type='A100D-10C', memory_min='10GB'))

    def test_mdev_vgpu_novas_class(self):
        self.assertEqual(
            {'resources:VGPU': '1', 'gpu:model': 'A100', 'gpu:mode': 'vgpu',
             'gpu:vgpu_type': 'A100D-10C', 'gpu:memory_min': '10GB'},
            specs(model='A100', vgpu_type='A100D-10C', memory_min='10GB',
                  vgpu_class='vgpu'))

    def test_quota_class_matches_nova_conf(self):
        # the class a flavor asks (and quota counts) is the one nova-conf
        # gives the host, whatever the spelling of the model
        from gpu_nova_ext.operator import nova_conf
        for mode, backend, vtype, expected in (
                ('vgpu', 'mdev', None,
                 nova_conf.mdev_resource_class('NVIDIA A100 80GB PCIe')),
                ('passthrough', 'mdev', None,
                 nova_conf.pci_resource_class('NVIDIA A100 80GB PCIe')),
                ('vgpu', 'vfio', 'L40S-12Q',
                 nova_conf.vgpu_resource_class('L40S-12Q'))):
            req = flavor.GpuFlavorRequest(
                model='NVIDIA A100 80GB PCIe', mode=mode,
                vgpu_backend=backend, vgpu_type=vtype)
            self.assertEqual(expected, flavor.quota_class(req))
        self.assertEqual('CUSTOM_VGPU_A100_80GB_PCIE',
                         nova_conf.mdev_resource_class('A100 80GB PCIe'))
        self.assertEqual('VGPU', flavor.quota_class(flavor.GpuFlavorRequest(
            model='A100', vgpu_class='vgpu')))

    def test_model_is_normalized(self):
        self.assertEqual('A100_80GB_PCIE',
                         specs(model='NVIDIA A100 80GB PCIe')['gpu:model'])

    def test_exact_model_adds_trait(self):
        out = specs(exact_model=True, count=2)
        self.assertEqual('required',
                         out['trait:CUSTOM_GPU_MODEL_A100_80GB_PCIE'])
        self.assertEqual('2', out['resources:CUSTOM_VGPU_A100_80GB_PCIE'])

    def test_mig_backed_vgpu(self):
        out = specs(vgpu_type='A100D-1-10C', mig=True)
        self.assertEqual('required', out['trait:CUSTOM_GPU_MIG_ENABLED'])
        self.assertEqual('1', out['resources:CUSTOM_VGPU_A100_80GB_PCIE'])

    def test_vendor_vfio_vgpu(self):
        out = specs(model='L40S', vgpu_type='L40S-12Q', vgpu_backend='vfio')
        self.assertEqual('vgpu-l40s-12q:1', out['pci_passthrough:alias'])
        self.assertEqual([], [k for k in out if k.startswith('resources:')])
        self.assertEqual('vgpu', out['gpu:mode'])

    def test_vfio_needs_type(self):
        exc = self.assertRaises(exception.GpuNovaExtException, specs,
                                model='L40S', vgpu_backend='vfio')
        self.assertIn('--vgpu-type', str(exc))

    def test_passthrough_pci_in_placement(self):
        out = specs(mode='passthrough', count=2, vendor='NVIDIA')
        self.assertEqual(
            {'pci_passthrough:alias': 'gpu-a100-80gb-pcie:2',
             'trait:CUSTOM_GPU_VENDOR_NVIDIA': 'required',
             'gpu:vendor': 'nvidia', 'gpu:model': 'A100_80GB_PCIE',
             'gpu:mode': 'passthrough'}, out)

    def test_passthrough_inventory_mode(self):
        out = specs(mode='passthrough', pci_accounting='inventory', count=4,
                    alias='a100')
        self.assertEqual('a100:4', out['pci_passthrough:alias'])
        self.assertEqual('4', out['resources:CUSTOM_GPU_A100_80GB_PCIE'])

    def test_all_gpu_keys(self):
        out = specs(cuda_cc_min='8.0', driver_min='550.54.15',
                    health='degraded_ok', intra_host_policy='coolest',
                    memory_min='40 GiB')
        self.assertEqual('8.0', out['gpu:cuda_cc_min'])
        self.assertEqual('550.54.15', out['gpu:driver_min'])
        self.assertEqual('degraded_ok', out['gpu:health'])
        self.assertEqual('coolest', out['gpu:intra_host_policy'])
        self.assertEqual('40GiB', out['gpu:memory_min'])

    def test_bad_values_named(self):
        for kw, word in ((dict(memory_min='lots'), 'lots'),
                         (dict(count=0), '--count'),
                         (dict(mode='shared'), 'shared'),
                         (dict(cuda_cc_min='8'), '--cuda-cc-min'),
                         (dict(driver_min='r550'), 'r550'),
                         (dict(vendor='matrox'), 'matrox'),
                         (dict(model='--'), '--model'),
                         (dict(vgpu_class='mig'), '--vgpu-class'),
                         (dict(mode='passthrough', vgpu_type='x'),
                          '--vgpu-type')):
            exc = self.assertRaises(exception.GpuNovaExtException, specs,
                                    **kw)
            self.assertIn(word, str(exc))

    def test_size_written_as_the_scheduler_reads_it(self):
        # the scheduler's parser is the one rule for a size
        for given, mib in (('16GB', 16384), ('16 GiB', 16384),
                           ('4096', 4096), ('4096mib', 4096)):
            written = specs(memory_min=given)['gpu:memory_min']
            self.assertNotIn(' ', written)
            self.assertEqual(
                mib, request.KEYS['gpu:memory_min'].parse(written))

    def test_every_value_of_the_registry(self):
        # each enumerated value and each sample of a free-form key gives
        # its gpu: key, which the scheduler parses without an error
        for key in request.KEYS.values():
            for value in key.choices or key.examples:
                if key.name == 'gpu:model' and ',' in value:
                    continue
                kw = {flavor.attribute(key): value}
                if key.name == 'gpu:mode' and value == 'passthrough':
                    kw['alias'] = 'a100'
                out = specs(**kw)
                self.assertIn(key.name, out)
                parsed = request.parse_extra_specs(out)
                self.assertEqual((), parsed.errors, (key.name, value))
                self.assertEqual(key.parse(out[key.name]),
                                 getattr(parsed, key.field))

    def test_fragmentation_policy(self):
        # issue 36: the CLI's own copy of the policies lacked it
        self.assertEqual('fragmentation', specs(
            intra_host_policy='fragmentation')['gpu:intra_host_policy'])

    def test_bad_values_say_what_the_parser_allows(self):
        for kw, allowed in (
                (dict(intra_host_policy='binpack'),
                 request.KEYS['gpu:intra_host_policy'].rule),
                (dict(power_profile='turbo'),
                 request.KEYS['gpu:power_profile'].rule),
                (dict(cuda_cc_min='8'), 'X.Y')):
            exc = self.assertRaises(exception.GpuNovaExtException, specs,
                                    **kw)
            self.assertIn(allowed, str(exc))
            self.assertIn('--' + list(kw)[0].replace('_', '-'), str(exc))

    def test_one_model(self):
        exc = self.assertRaises(exception.GpuNovaExtException, specs,
                                model='A100, H100')
        self.assertIn('one GPU model', str(exc))

    def test_nova_keys_pass_novas_validators(self):
        # The keys Nova owns must pass nova-api's own validators.
        for out in (specs(exact_model=True, mig=True, vendor='nvidia'),
                    specs(vgpu_class='vgpu'),
                    specs(mode='passthrough', pci_accounting='inventory'),
                    specs(model='L40S', vgpu_type='L40S-12Q',
                          vgpu_backend='vfio')):
            for key, value in out.items():
                if key.startswith('gpu:'):
                    continue
                errors = []
                for validator in NOVA_VALIDATORS:
                    try:
                        validator.validate(key, value)
                        break
                    except Exception as exc:
                        errors.append(str(exc))
                else:
                    self.fail('%s=%s: %s' % (key, value, errors))


class TestResolveModel(testtools.TestCase):
    """A model prefix against Placement's resource classes (no I/O)."""

    CLASSES = ['VCPU', 'CUSTOM_VGPU_A100_80GB_PCIE', 'CUSTOM_VGPU_L40S',
               'CUSTOM_VGPU_H100_80GB_HBM3', 'CUSTOM_VGPU_H100_NVL',
               'CUSTOM_GPU_A100_40GB_PCIE', 'CUSTOM_GPU_VGPU_L40S_12Q']

    def resolve(self, **kw):
        return flavor.resolve_model(flavor.GpuFlavorRequest(**kw),
                                    self.CLASSES)

    def test_one_match_resolves(self):
        req = self.resolve(model='A100')
        self.assertEqual('A100_80GB_PCIE', req.model)
        self.assertEqual('CUSTOM_VGPU_A100_80GB_PCIE',
                         flavor.quota_class(req))
        self.assertEqual('A100_80GB_PCIE',
                         flavor.extra_specs(req)['gpu:model'])
        # passthrough: the classes of passthrough GPUs, and the alias
        req = self.resolve(model='a100', mode='passthrough')
        self.assertEqual('A100_40GB_PCIE', req.model)
        self.assertEqual('gpu-a100-40gb-pcie:1',
                         flavor.extra_specs(req)['pci_passthrough:alias'])

    def test_two_matches_refused_naming_both(self):
        exc = self.assertRaises(exception.InvalidArgument, self.resolve,
                                model='H100')
        self.assertIn('H100_80GB_HBM3, H100_NVL', str(exc))
        self.assertIn('--model', str(exc))

    def test_left_alone(self):
        for kw in (dict(model='L40S'),  # its class exists
                   dict(model='A10'),  # nothing matches: refused later
                   dict(model='A100', vgpu_class='vgpu'),  # Nova's VGPU
                   dict(model='L40S', vgpu_type='L40S-12Q',
                        vgpu_backend='vfio')):  # a type's class
            self.assertEqual(kw['model'], self.resolve(**kw).model, kw)


class TestDryRun(testtools.TestCase):
    """openstack gpu flavor create --dry-run: nothing is contacted."""

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud('http://127.0.0.1:1/placement'))

    def _run(self, argv):
        return osc_client.openstack('gpu', 'flavor', 'create', *argv)

    def test_dry_run_shows_specs_and_cli(self):
        rc, out, err = self._run(
            ['vgpu.a100', '--model', 'A100_80GB_PCIE',
             '--count', '1', '--mode', 'vgpu', '--vgpu-type', 'A100D-10C',
             '--vcpus', '8', '--ram', '32768', '--disk', '40', '--dry-run',
             '-f', 'json'])
        self.assertEqual(0, rc, err)
        shown = json.loads(out)
        self.assertEqual((None, 'vgpu.a100', 8, 32768, 40),
                         (shown['id'], shown['name'], shown['vcpus'],
                          shown['ram'], shown['disk']))
        self.assertEqual('1', shown['extra_specs'][
            'resources:CUSTOM_VGPU_A100_80GB_PCIE'])
        self.assertEqual('CUSTOM_VGPU_A100_80GB_PCIE', shown['quota_class'])
        self.assertIn('--property gpu:vgpu_type=A100D-10C',
                      shown['openstack_cli'])
        self.assertIn('openstack flavor create', shown['openstack_cli'])

    def test_bad_input_is_one_line(self):
        rc, out, err = self._run(
            ['x', '--model', 'A100', '--memory-min', 'huge', '--dry-run'])
        self.assertEqual(2, rc)
        self.assertIn('huge', err)
        self.assertEqual(1, len(err.strip().splitlines()))
