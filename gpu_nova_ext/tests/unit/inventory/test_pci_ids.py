"""The shipped PCI ID table and the vGPU name helpers."""
import testtools

from gpu_nova_ext.inventory import pci_ids
from gpu_nova_ext import naming
from gpu_nova_ext.tests.fakes import nvml as fake_nvml


class TestPciIds(testtools.TestCase):

    def test_table_spells_models_as_nvml_does(self):
        # a GPU gets the same model trait with or without NVML
        for profile in fake_nvml.PROFILES.values():
            device_id = '%04x' % (profile.pci_device_id >> 16)
            self.assertEqual(naming.normalize_model(profile.name),
                             pci_ids.model_for('10de', device_id),
                             profile.key)

    def test_issue_models_present(self):
        models = set(pci_ids.PCI_MODELS.values())
        for model in ('A100_80GB_PCIE', 'H100_80GB_HBM3', 'H200', 'B200',
                      'L40S', 'L4', 'TESLA_T4', 'A10', 'A30', 'MI210',
                      'MI250', 'MI300X', 'FLEX_170', 'MAX_1550'):
            self.assertIn(model, models)
        for model in models:
            self.assertEqual(model, naming.normalize_model(model))

    def test_lookup_spellings(self):
        self.assertEqual('A100_80GB_PCIE', pci_ids.model_for('0x10DE',
                                                             '0x20B5'))
        self.assertIsNone(pci_ids.model_for('10de', 'ffff'))
        self.assertIsNone(pci_ids.model_for(None, None))

    def test_product_string_fallback(self):
        self.assertEqual('A2_A16', pci_ids.model_from_product(
            'GA107GL [A2 / A16]'))
        self.assertEqual('RADEON_PRO_W7900', pci_ids.model_from_product(
            'AMD Radeon PRO W7900'))
        self.assertIsNone(pci_ids.model_from_product(None))


class TestVgpuNames(testtools.TestCase):

    def test_names(self):
        self.assertEqual('A100D-10C', naming.vgpu_type_name('GRID A100D-10C'))
        self.assertEqual('L4-1B', naming.vgpu_type_name('NVIDIA L4-1B'))
        self.assertEqual(10240,
                         naming.vgpu_type_framebuffer_mib('A100D-10C'))
        self.assertEqual(512, naming.vgpu_type_framebuffer_mib('M60-0B'))
        self.assertEqual(40960,
                         naming.vgpu_type_framebuffer_mib('A100D-3-40C'))
        self.assertIsNone(naming.vgpu_type_framebuffer_mib('weird'))
        self.assertTrue(naming.is_mig_backed_vgpu_type('A100D-1-10C'))
        self.assertFalse(naming.is_mig_backed_vgpu_type('A100D-10C'))
        self.assertEqual('nvidia-471', naming.nvidia_mdev_type_id(471))
        self.assertEqual('amd', naming.vendor_from_name('AMD Instinct'))
        self.assertIsNone(naming.vendor_from_name('Tesla T4'))
