# SPDX-License-Identifier: Apache-2.0

"""The nova.conf drop-in generator, parsed back with oslo.config and checked
with Nova's own device_spec, alias and trait parsing."""
import json
import os
import tempfile

import jsonschema
from nova.compute import pci_placement_translator
import nova.conf.devices
import nova.conf.pci
import nova.conf.scheduler
from nova.pci import devspec
from nova.pci import request as pci_request
from oslo_config import cfg
import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.tests.unit.operator import fakes


def parse(text):
    """Load ``text`` as nova-compute would.

    Nova's own option definitions, then the dynamic ``[mdev_*]`` groups.
    """
    with tempfile.NamedTemporaryFile('w', suffix='.conf',
                                     delete=False) as f:
        f.write(text)
    conf = cfg.ConfigOpts()
    nova.conf.pci.register_opts(conf)
    nova.conf.devices.register_opts(conf)
    nova.conf.scheduler.register_opts(conf)
    conf(['--config-file', f.name], project='nova',
         default_config_files=[], default_config_dirs=[])
    os.unlink(f.name)
    nova.conf.devices.register_dynamic_opts(conf)
    return conf


class TestGenerate(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.drop = nova_conf.generate(
            fakes.mixed_host(),
            nova_conf.GeneratorOptions(max_instances=True))
        self.conf = parse(self.drop.render())
        self.specs = [json.loads(s) for s in self.conf.pci.device_spec]
        self.aliases = {a['name']: a for a in
                        (json.loads(s) for s in self.conf.pci.alias)}

    def _spec(self, address):
        for spec in self.specs:
            if spec['address'] == address:
                return spec
        self.fail('no device_spec for %s in %s' % (address, self.specs))

    def test_passthrough_device_spec_tags(self):
        spec = self._spec('0000:3b:00.0')
        self.assertEqual('CUSTOM_GPU_A100_80GB_PCIE', spec['resource_class'])
        self.assertEqual(('10de', '20b5'),
                         (spec['vendor_id'], spec['product_id']))
        self.assertEqual('yes', spec['managed'])
        # present at all, nova-compute needs libvirt >= 10 / QEMU >= 8.2.2
        self.assertNotIn('live_migratable', spec)
        traits = spec['traits'].split(',')
        for trait in ('CUSTOM_GPU_VENDOR_NVIDIA',
                      'CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                      'CUSTOM_GPU_MEMORY_80GB', 'CUSTOM_GPU_CUDA_CC_8_0',
                      'CUSTOM_GPU_DRIVER_550', 'CUSTOM_GPU_MODE_PASSTHROUGH',
                      'CUSTOM_GPU_MIG_CAPABLE'):
            self.assertIn(trait, traits)
        self.assertNotIn('CUSTOM_GPU_MIG_ENABLED', traits)
        self._spec('0000:3c:00.0')

    def test_traits_survive_nova_normalization(self):
        # Nova keeps CUSTOM_ and standard names as they are; anything else
        # it would rename, and the flavor's trait: keys would miss.
        for spec in self.specs:
            self.assertEqual(
                set(spec['traits'].split(',')),
                pci_placement_translator.get_traits(spec['traits']))
            self.assertEqual(
                spec['resource_class'],
                pci_placement_translator.get_resource_class(
                    spec['resource_class'], '10de', 'ffff'))

    def test_device_specs_accepted_by_nova(self):
        for spec in self.specs:
            parsed = devspec.PciDeviceSpec(dict(spec))
            tags = parsed.get_tags()
            self.assertIn(tags['managed'], ('true', 'false'))
            self.assertIn(tags.get('live_migratable', 'false'),
                          ('true', 'false'))

    def test_aliases_valid_for_nova(self):
        for alias in self.aliases.values():
            jsonschema.validate(alias, pci_request._ALIAS_SCHEMA)
        self.assertEqual(
            {'name': 'gpu-a100-80gb-pcie', 'vendor_id': '10de',
             'product_id': '20b5',
             'resource_class': 'CUSTOM_GPU_A100_80GB_PCIE'},
            self.aliases['gpu-a100-80gb-pcie'])
        self.assertEqual(
            {'name': 'vgpu-l40s-12q', 'device_type': 'type-VF',
             'resource_class': 'CUSTOM_GPU_VGPU_L40S_12Q'},
            self.aliases['vgpu-l40s-12q'])
        self.assertEqual(2, len(self.aliases))
        self.assertTrue(self.conf.pci.report_in_placement)

    def test_vendor_vfio_vfs(self):
        gpu = fakes.vfio_gpu()
        for vf in gpu.vfs:
            spec = self._spec(vf)
            self.assertEqual('CUSTOM_GPU_VGPU_L40S_12Q',
                             spec['resource_class'])
            self.assertEqual('no', spec['managed'])
            self.assertEqual('yes', spec['live_migratable'])
            self.assertIn('CUSTOM_GPU_MODE_VGPU', spec['traits'].split(','))
        # the PF itself is not passed through
        self.assertNotIn(gpu.pci_address, [s['address'] for s in self.specs])
        self.assertTrue(any('current_vgpu_type' in n
                            for n in self.drop.notes))

    def test_mdev_sections(self):
        self.assertEqual(['nvidia-222', 'nvidia-471'],
                         self.conf.devices.enabled_mdev_types)
        t4 = self.conf['mdev_nvidia-222']
        self.assertEqual(['0000:84:00.0'], t4.device_addresses)
        self.assertEqual(16, t4.max_instances)
        a100 = self.conf['mdev_nvidia-471']
        # SR-IOV GPU: Nova wants the VFs, each offering one instance
        self.assertEqual(fakes.sriov_mdev_gpu().vfs, a100.device_addresses)
        self.assertEqual(4, a100.max_instances)
        # one resource class per model (quota per model)
        self.assertEqual('CUSTOM_VGPU_A100_80GB_PCIE', a100.mdev_class)
        self.assertEqual('CUSTOM_VGPU_T4', t4.mdev_class)
        # the first-listed choice is reported for the T4 (two types)
        self.assertTrue(any('0000:84:00.0' in n and 'nvidia-222' in n
                            for n in self.drop.notes))

    def test_scheduler_section(self):
        fs = self.conf.filter_scheduler
        self.assertEqual(list(nova_conf.AVAILABLE_FILTERS),
                         fs.available_filters)
        self.assertEqual(
            list(nova_conf.NOVA_DEFAULT_FILTERS) + ['PciPassthroughFilter']
            + list(nova_conf.GPU_FILTERS),
            fs.enabled_filters)
        self.assertEqual(list(nova_conf.WEIGHT_CLASSES), fs.weight_classes)
        self.assertTrue(fs.pci_in_placement)

    def test_nova_default_filters_match_nova(self):
        conf = cfg.ConfigOpts()
        nova.conf.scheduler.register_opts(conf)
        conf([], default_config_files=[], default_config_dirs=[])
        self.assertEqual(list(nova_conf.NOVA_DEFAULT_FILTERS),
                         conf.filter_scheduler.enabled_filters)

    def test_render_is_deterministic(self):
        host = fakes.mixed_host()
        host.gpus.reverse()
        self.assertEqual(self.drop.render(),
                         nova_conf.generate(host, nova_conf.GeneratorOptions(
                             max_instances=True)).render())

    def test_no_max_instances_unless_asked(self):
        conf = parse(nova_conf.generate(fakes.mixed_host()).render())
        self.assertIsNone(conf['mdev_nvidia-222'].max_instances)
        self.assertEqual(['0000:84:00.0'],
                         conf['mdev_nvidia-222'].device_addresses)


class TestOptions(testtools.TestCase):

    def test_vgpu_class_keeps_novas_vgpu(self):
        drop = nova_conf.generate(fakes.mixed_host(),
                                  nova_conf.GeneratorOptions(
                                      vgpu_class='vgpu'))
        conf = parse(drop.render())
        self.assertEqual('VGPU', conf['mdev_nvidia-222'].mdev_class)
        self.assertEqual([], drop.values('mdev_nvidia-222', 'mdev_class'))

    def test_mdev_class_valid_for_nova(self):
        # Nova's own option type (a resource class name) accepts it
        drop = nova_conf.generate(fakes.mixed_host())
        conf = parse(drop.render())
        self.assertEqual(
            nova_conf.mdev_resource_class('A100 80GB PCIe'),
            conf['mdev_nvidia-471'].mdev_class)

    def test_one_type_two_models_keeps_vgpu_with_note(self):
        a, b = fakes.mdev_gpu('0000:84:00.0'), fakes.mdev_gpu('0000:86:00.0')
        b.model = 'T4_16GB'
        drop = nova_conf.generate(base.HostInventory('h', [a, b]),
                                  nova_conf.GeneratorOptions(
                                      vgpu_types=('nvidia-222',)))
        self.assertEqual([], drop.values('mdev_nvidia-222', 'mdev_class'))
        self.assertTrue(any('mdev_class left out' in n and 'T4, T4_16GB' in n
                            for n in drop.notes), drop.notes)

    def test_mdev_class_needs_a_model(self):
        gpu = fakes.mdev_gpu()
        gpu.model = None
        drop = nova_conf.generate(base.HostInventory('h', [gpu]),
                                  nova_conf.GeneratorOptions(
                                      vgpu_types=('nvidia-222',)))
        self.assertEqual([], drop.values('mdev_nvidia-222', 'mdev_class'))
        self.assertTrue(any('no known model' in n for n in drop.notes))
        self.assertRaises(ValueError, nova_conf.mdev_resource_class, '')

    def test_preferred_vgpu_type(self):
        host = base.HostInventory('h', [fakes.mdev_gpu(), fakes.vfio_gpu()])
        opts = nova_conf.GeneratorOptions(
            vgpu_types=('GRID T4-2B', 'L40S-24Q'), max_instances=True)
        conf = parse(nova_conf.generate(host, opts).render())
        self.assertEqual(['nvidia-223'], conf.devices.enabled_mdev_types)
        self.assertEqual(8, conf['mdev_nvidia-223'].max_instances)
        rcs = {json.loads(s)['resource_class'] for s in conf.pci.device_spec}
        self.assertEqual({'CUSTOM_GPU_VGPU_L40S_24Q'}, rcs)

    def test_type_not_offered_leaves_gpu_out(self):
        host = base.HostInventory('h', [fakes.mdev_gpu()])
        drop = nova_conf.generate(host, nova_conf.GeneratorOptions(
            vgpu_types=('nvidia-999',)))
        self.assertEqual([], drop.values('devices', 'enabled_mdev_types'))
        self.assertIn('nvidia-999', ' '.join(drop.notes))
        self.assertIn('nvidia-222 (GRID T4-1B)', ' '.join(drop.notes))

    def test_offered_type_kept(self):
        gpu = fakes.mdev_gpu()
        gpu.offered_vgpu_type = 'nvidia-223'
        drop = nova_conf.generate(base.HostInventory('h', [gpu]))
        self.assertEqual(['nvidia-223'],
                         drop.values('devices', 'enabled_mdev_types'))
        self.assertEqual([], drop.notes)

    def test_mig_backed_vgpu(self):
        drop = nova_conf.generate(base.HostInventory('h', [fakes.mig_gpu()]))
        conf = parse(drop.render())
        self.assertEqual(['nvidia-699'], conf.devices.enabled_mdev_types)
        self.assertEqual(['0000:86:00.0'],
                         conf['mdev_nvidia-699'].device_addresses)
        self.assertEqual([], conf.pci.device_spec)

    def test_legacy_pci_and_no_scheduler(self):
        host = base.HostInventory('h', [fakes.passthrough_gpu(),
                                        fakes.vfio_gpu()])
        drop = nova_conf.generate(host, nova_conf.GeneratorOptions(
            pci_in_placement=False, scheduler=False, numa_policy='preferred'))
        conf = parse(drop.render())
        self.assertFalse(conf.pci.report_in_placement)
        self.assertNotIn('filter_scheduler', drop.sections)
        alias = json.loads(conf.pci.alias[0])
        self.assertEqual('preferred', alias['numa_policy'])
        self.assertIn('report_in_placement', ' '.join(drop.notes))

    def test_vfio_without_vfs_is_explained(self):
        gpu = fakes.vfio_gpu()
        gpu.vfs = []
        drop = nova_conf.generate(base.HostInventory('h', [gpu]))
        self.assertEqual([], drop.values('pci', 'device_spec'))
        self.assertIn('sriov-manage', ' '.join(drop.notes))

    def test_mode_inferred_without_discovery_mode(self):
        gpu = fakes.mig_gpu()
        self.assertEqual('mig-vgpu', nova_conf.effective_mode(gpu))
        gpu = fakes.vfio_gpu()
        gpu.mode = None
        self.assertEqual('vgpu-vfio', nova_conf.effective_mode(gpu))
        gpu = fakes.passthrough_gpu()
        gpu.mode = None
        self.assertEqual('passthrough', nova_conf.effective_mode(gpu))

    def test_no_gpu(self):
        drop = nova_conf.generate(base.HostInventory('h'))
        self.assertIn('no GPU found on this host.', drop.notes)
        self.assertNotIn('pci', drop.sections)
        self.assertIn('filter_scheduler', drop.sections)

    def test_alias_names_usable_in_flavor(self):
        self.assertEqual('gpu-a100-80gb-pcie',
                         nova_conf.alias_name('NVIDIA A100 80GB PCIe'))
        self.assertEqual('vgpu-a100d-10c',
                         nova_conf.vgpu_alias_name('A100D-10C'))

    def test_type_chosen_by_nvml_name(self):
        # libvirt names the type after its own catalogue; NVML's name for
        # the same id is what operators know
        gpu = fakes.mdev_gpu()
        for t in gpu.mdev_types:
            t.name = 'GRID M60-0B'
        gpu.vgpu_types = [base.MdevType(id='nvidia-223', name='T4-2B',
                                        max=8)]
        drop = nova_conf.generate(base.HostInventory('h', [gpu]),
                                  nova_conf.GeneratorOptions(
                                      vgpu_types=('T4-2B',)))
        self.assertEqual(['nvidia-223'],
                         drop.values('devices', 'enabled_mdev_types'))
