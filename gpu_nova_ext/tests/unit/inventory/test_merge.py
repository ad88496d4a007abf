# SPDX-License-Identifier: Apache-2.0

"""Merging source reports and classifying GPUs (pure functions)."""
import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import merge
from gpu_nova_ext.inventory import nova_config

A = '0000:3b:00.0'


def mdev_type(id, name, available=1, parent=A, **kw):
    return base.MdevType(id=id, name=name, available=available,
                         parent=parent, **kw)


class TestMerge(testtools.TestCase):

    def test_fields_by_source_order(self):
        libvirt = base.Gpu(A, vendor='nvidia', vendor_id='10de',
                           product_id='20b5', product_name='GA100 [A100]',
                           numa_node=0, vfs=['0000:3b:00.4'],
                           mdev_types=[mdev_type('nvidia-471', 'A100D-10C',
                                                 8)],
                           sources=['libvirt'])
        nvml = base.Gpu(A, vendor='nvidia', product_name='NVIDIA A100',
                        model='A100_80GB_PCIE', memory_mib=81920,
                        numa_node=1, metrics={'power_w': 50},
                        health=base.Health('degraded', ['hot']),
                        vgpu_types=[base.MdevType('nvidia-471', 'A100D-10C',
                                                  max=8,
                                                  framebuffer_mib=10240)],
                        sources=['nvml'])
        sim = base.Gpu(A, metrics={'power_w': 70, 'temperature_c': 40},
                       health=base.Health('healthy', ['fine']),
                       sources=['simulated'])
        inv = merge.merge([('libvirt', {A: libvirt}), ('nvml', {A: nvml}),
                           ('simulated', {A: sim})], 'h')
        gpu = inv.gpu(A)
        self.assertEqual(('GA100 [A100]', 'A100_80GB_PCIE', 81920, 0),
                         (gpu.product_name, gpu.model, gpu.memory_mib,
                          gpu.numa_node))
        self.assertEqual({'power_w': 70, 'temperature_c': 40}, gpu.metrics)
        self.assertEqual(base.Health('degraded', ['hot', 'fine']),
                         gpu.health)
        self.assertEqual(['libvirt', 'nvml', 'simulated'], gpu.sources)
        self.assertEqual(1, len(gpu.mdev_types))
        self.assertEqual(1, len(gpu.vgpu_types))

    def test_libvirt_is_the_authority_on_which_gpus_exist(self):
        warnings = []
        inv = merge.merge(
            [('libvirt', {A: base.Gpu(A)}),
             ('simulated', {A: base.Gpu(A), '0000:3c:00.0':
                            base.Gpu('0000:3c:00.0')})],
            'h', warn=lambda m, *a: warnings.append(m % a))
        self.assertEqual([A], [g.pci_address for g in inv.gpus])
        self.assertEqual(1, len(warnings))
        self.assertIn('0000:3c:00.0', warnings[0])
        self.assertIn('simulated', warnings[0])

    def test_without_libvirt_every_gpu_counts(self):
        inv = merge.merge([('nvml', {A: base.Gpu(A), '0000:86:00.0':
                                     base.Gpu('0000:86:00.0')})], 'h')
        self.assertEqual([A, '0000:86:00.0'],
                         [g.pci_address for g in inv.gpus])
        self.assertEqual(['nvml'], inv.gpus[0].sources)


class TestClassify(testtools.TestCase):

    def classify(self, gpu, nova=None):
        warnings = []
        inv = base.HostInventory('h', [gpu])
        merge.classify(inv, nova, warn=lambda m, *a: warnings.append(m % a))
        return gpu, warnings

    def test_passthrough(self):
        gpu, _ = self.classify(base.Gpu(A, vendor_id='10de',
                                        product_id='2330',
                                        sources=['libvirt']))
        self.assertEqual(('passthrough', None, 'H100_80GB_HBM3', 'nvidia'),
                         (gpu.mode, gpu.offered_vgpu_type, gpu.model,
                          gpu.vendor))
        self.assertEqual([], gpu.to_state()['vgpu_types'])

    def test_model_falls_back_to_product_string(self):
        gpu, _ = self.classify(base.Gpu(A, vendor_id='10de',
                                        product_id='25b6',
                                        product_name='GA107GL [A2 / A16]'))
        self.assertEqual('A2_A16', gpu.model)

    def test_vgpu_offered_from_existing_mdevs(self):
        gpu = base.Gpu(A, mdev_types=[mdev_type('nvidia-471', 'A100D-10C'),
                                      mdev_type('nvidia-474', 'A100D-40C')],
                       mdevs=[base.Mdev('u1', 'nvidia-474', A),
                              base.Mdev('u2', 'nvidia-471', A),
                              base.Mdev('u3', 'nvidia-474', A)],
                       sources=['libvirt'])
        gpu, _ = self.classify(gpu)
        self.assertEqual(('vgpu', 'nvidia-474'),
                         (gpu.mode, gpu.offered_vgpu_type))

    def test_nova_conf_wins_over_mdevs(self):
        gpu = base.Gpu(A, vfs=['0000:3b:00.4'],
                       mdev_types=[mdev_type('nvidia-471', 'A100D-10C'),
                                   mdev_type('nvidia-474', 'A100D-40C')],
                       mdevs=[base.Mdev('u1', 'nvidia-474', A)])
        nova = nova_config.NovaMdevConfig(
            enabled_types=['nvidia-474', 'nvidia-471'],
            device_addresses={'nvidia-471': ['0000:3b:00.4']})
        gpu, _ = self.classify(gpu, nova)
        self.assertEqual('nvidia-471', gpu.offered_vgpu_type)

    def test_nova_conf_type_the_gpu_lacks(self):
        gpu = base.Gpu(A, mdev_types=[mdev_type('nvidia-471', 'A100D-10C')])
        gpu, warnings = self.classify(gpu, nova_config.NovaMdevConfig(
            enabled_types=['nvidia-222'], files=['/etc/nova/nova.conf']))
        self.assertIsNone(gpu.offered_vgpu_type)
        self.assertEqual(1, len(warnings))
        self.assertIn('nvidia-222', warnings[0])
        self.assertIn(A, warnings[0])

    def test_mig_backed_vgpu(self):
        types = [mdev_type('nvidia-699', 'A100D-1-10C', 7),
                 mdev_type('nvidia-701', 'A100D-3-40C', 2)]
        gpu, _ = self.classify(base.Gpu(A, mdev_types=list(types),
                                        mig_enabled=True))
        self.assertEqual('mig-vgpu', gpu.mode)
        # offered type decides
        gpu, _ = self.classify(base.Gpu(
            A, mdev_types=list(types) + [mdev_type('nvidia-471',
                                                   'A100D-10C')],
            mdevs=[base.Mdev('u', 'nvidia-471', A)]))
        self.assertEqual('vgpu', gpu.mode)

    def test_never_two_modes(self):
        gpu = base.Gpu(A, vfs=['0000:3b:00.4'],
                       mdev_types=[mdev_type('nvidia-471', 'A100D-10C')],
                       vfio_vgpu_types=[mdev_type('nvidia-1050', 'L40S-8Q',
                                                  parent='0000:3b:00.4')],
                       vfio_current_types={'0000:3b:00.4': 'nvidia-1050'})
        gpu, warnings = self.classify(gpu)
        self.assertEqual('vgpu', gpu.mode)
        self.assertEqual(['nvidia-471'],
                         [t['id'] for t in gpu.to_state()['vgpu_types']])
        self.assertEqual(1, len(warnings))

    def test_vendor_vfio(self):
        vfs = ['0000:3b:00.4', '0000:3b:00.5']
        gpu = base.Gpu(A, vfs=vfs, vfio_vgpu_types=[
            mdev_type('nvidia-1050', 'L40S-8Q', parent=vfs[1])],
            vfio_current_types={vfs[0]: 'nvidia-1050'})
        gpu, _ = self.classify(gpu)
        self.assertEqual(('vgpu-vfio', 'nvidia-1050'),
                         (gpu.mode, gpu.offered_vgpu_type))

    def test_nvml_only_vgpu_types(self):
        gpu = base.Gpu(A, vgpu_types=[base.MdevType('nvidia-471',
                                                    'A100D-10C', max=8)],
                       sources=['nvml'])
        gpu, _ = self.classify(gpu)
        self.assertEqual('vgpu', gpu.mode)
        gpu.sources.append('libvirt')
        gpu, _ = self.classify(gpu)
        self.assertEqual('passthrough', gpu.mode)


class TestMergedVgpuTypes(testtools.TestCase):

    def test_vfs_summed_and_capped_by_nvml_max(self):
        vfs = ['0000:3b:00.%d' % i for i in range(4, 8)] + [
            '0000:3b:01.%d' % i for i in range(8)]
        gpu = base.Gpu(
            A, mode='vgpu', vfs=vfs,
            mdev_types=[mdev_type('nvidia-474', 'A100D-40C', 1, parent=v)
                        for v in vfs],
            mdevs=[base.Mdev('u', 'nvidia-474', vfs[0])],
            vgpu_types=[base.MdevType('nvidia-474', 'A100D-40C', max=2,
                                      framebuffer_mib=40960)])
        self.assertEqual(
            [{'id': 'nvidia-474', 'name': 'A100D-40C',
              'framebuffer_mib': 40960, 'available': 1, 'max': 2}],
            gpu.to_state()['vgpu_types'])


class TestWarnOnce(testtools.TestCase):

    def test_same_warning_logged_once_but_always_reported(self):
        import logging

        import fixtures
        logger = self.useFixture(fixtures.FakeLogger(
            level=logging.DEBUG, format='%(levelname)s %(message)s'))
        conf = type('Conf', (), {})()

        class Source(base.InventorySource):
            def discover(self):
                self.warn('Skipping GPU %s: test %s.', A, id(self))
                self.warn('Skipping GPU %s: repeated.', A)
                return {}

        for _ in range(3):
            source = Source(conf)
            source.discover()
            self.assertEqual(2, len(source.warnings))
        lines = logger.output.splitlines()
        self.assertEqual(1, lines.count(
            'WARNING Skipping GPU %s: repeated.' % A))
        self.assertEqual(2, lines.count(
            'DEBUG Skipping GPU %s: repeated.' % A))
