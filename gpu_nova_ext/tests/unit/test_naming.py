# SPDX-License-Identifier: Apache-2.0

"""The one naming module: models, traits, provider names, PCI addresses."""
import testtools

from gpu_nova_ext import naming


class TestModels(testtools.TestCase):

    def test_normalize_drops_vendor_word_only(self):
        self.assertEqual('A100_80GB_PCIE',
                         naming.normalize_model('NVIDIA A100 80GB PCIe'))
        self.assertEqual('H100_80GB_HBM3',
                         naming.normalize_model('NVIDIA H100 80GB HBM3'))
        self.assertEqual('TESLA_T4', naming.normalize_model('Tesla T4'))
        self.assertEqual('INSTINCT_MI210',
                         naming.normalize_model('AMD Instinct MI210'))
        self.assertEqual('DATA_CENTER_GPU_MAX_1550', naming.normalize_model(
            'Intel(R) Data Center GPU Max 1550'))
        self.assertEqual('', naming.normalize_model(''))

    def test_prefix_match_at_underscore_boundary(self):
        self.assertTrue(naming.model_matches('A100', 'A100_80GB_PCIE'))
        self.assertTrue(naming.model_matches('a100-80gb', 'A100_80GB_PCIE'))
        self.assertFalse(naming.model_matches('A10', 'A100_80GB_PCIE'))
        self.assertFalse(naming.model_matches('A100_40GB', 'A100_80GB_PCIE'))
        self.assertFalse(naming.model_matches('', 'A100_80GB_PCIE'))

    def test_brand_word_optional_in_request(self):
        self.assertTrue(naming.model_matches('T4', 'TESLA_T4'))
        self.assertTrue(naming.model_matches('Tesla T4', 'TESLA_T4'))
        self.assertTrue(naming.model_matches('MI210', 'INSTINCT_MI210'))
        self.assertTrue(
            naming.model_matches('MAX', 'DATA_CENTER_GPU_MAX_1550'))
        self.assertFalse(naming.model_matches('T', 'TESLA_T4'))
        self.assertFalse(naming.model_matches('TESLA_V100', 'TESLA_T4'))

    def test_marketed_memory(self):
        for mib, gb in ((15360, 16), (23034, 24), (40536, 40), (81559, 80),
                        (81920, 80), (95830, 94), (143771, 141),
                        (196608, 192)):
            self.assertEqual(gb, naming.marketed_memory_gb(mib), mib)


class TestTraits(testtools.TestCase):

    def test_vocabulary(self):
        self.assertEqual('CUSTOM_GPU_VENDOR_NVIDIA',
                         naming.vendor_trait('nvidia'))
        self.assertEqual('CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                         naming.model_trait('NVIDIA A100 80GB PCIe'))
        self.assertEqual('CUSTOM_GPU_MEMORY_24GB', naming.memory_trait(23034))
        self.assertEqual('CUSTOM_GPU_DRIVER_550',
                         naming.driver_trait('550.54.15'))
        self.assertEqual('CUSTOM_GPU_MODE_PASSTHROUGH',
                         naming.mode_trait('passthrough'))
        for mode in ('vgpu', 'vgpu-vfio', 'mig-vgpu'):
            self.assertEqual('CUSTOM_GPU_MODE_VGPU', naming.mode_trait(mode))
        self.assertEqual('CUSTOM_GPU_A100_80GB_PCIE',
                         naming.model_resource_class('A100_80GB_PCIE'))

    def test_cuda_cc_adds_standard_trait_where_os_traits_has_one(self):
        self.assertEqual(['CUSTOM_GPU_CUDA_CC_7_0',
                          'HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0'],
                         naming.cuda_cc_traits('7.0'))
        self.assertEqual(['CUSTOM_GPU_CUDA_CC_9_0'],
                         naming.cuda_cc_traits('9.0'))

    def test_ownership(self):
        self.assertTrue(naming.is_ours('CUSTOM_GPU_MODEL_L4'))
        self.assertFalse(naming.is_ours('CUSTOM_GPUX'))
        self.assertFalse(naming.is_ours('COMPUTE_STATUS_DISABLED'))
        # The operator's reservations are not the agent's to remove.
        self.assertFalse(naming.is_ours(naming.reservation_trait('ab12')))

    def test_reservation_trait_round_trips(self):
        for project in ('6f70656e737461636b20342065766572', 'demo',
                        'ABC', 'abc', 'p-1_x', '\u00e9quipe', 'f' * 64):
            trait = naming.reservation_trait(project)
            self.assertTrue(trait.startswith(naming.RESERVATION_PREFIX))
            self.assertEqual(project, naming.reservation_project(trait))
        self.assertEqual(
            'CUSTOM_GPU_RESERVED_6F70656E',
            naming.reservation_trait('6f70656e'))
        # Upper- and lower-case ids are different Keystone ids.
        self.assertNotEqual(naming.reservation_trait('abc'),
                            naming.reservation_trait('ABC'))
        self.assertIsNone(naming.reservation_project('CUSTOM_GPU_MODEL_L4'))
        self.assertIsNone(
            naming.reservation_project('CUSTOM_GPU_RESERVED_B32_!!'))
        for bad in ('', 'x' * 65):
            self.assertRaises(ValueError, naming.reservation_trait, bad)

    def test_invalid_trait_refused(self):
        self.assertRaises(ValueError, naming.driver_trait, '')


class TestPciNames(testtools.TestCase):

    def test_normalize_spellings(self):
        for spelling in ('00000000:3B:00.0', '0000:3b:00.0', '3b:00.0',
                         'pci_0000_3b_00_0'):
            self.assertEqual('0000:3b:00.0',
                             naming.normalize_pci_address(spelling))

    def test_bad_address_names_it(self):
        exc = self.assertRaises(ValueError, naming.normalize_pci_address,
                                '3b-00-0')
        self.assertIn('3b-00-0', str(exc))

    def test_provider_names_as_nova_makes_them(self):
        self.assertEqual('cmp-1_pci_0000_3b_00_0',
                         naming.pgpu_provider_name('cmp-1', '0000:3b:00.0'))
        self.assertEqual('cmp-1_0000:3B:00.0',
                         naming.pci_provider_name('cmp-1', '0000:3b:00.0'))
        self.assertEqual('cmp-1_gpu_0000:3b:00.0',
                         naming.own_provider_name('cmp-1', '0000:3b:00.0'))
