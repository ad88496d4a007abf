# SPDX-License-Identifier: Apache-2.0

"""The shipped PCI ID table, its generator and the vGPU name helpers."""
import os
import subprocess
import sys

import fixtures
import testtools

from gpu_nova_ext.inventory import gpu_device_ids
from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext.inventory import pci_ids_parser
from gpu_nova_ext import naming
from gpu_nova_ext_dev.fakes import nvml as fake_nvml

HERE = os.path.dirname(__file__)
FIXTURE = os.path.join(HERE, os.pardir, os.pardir, 'data', 'pciids',
                       'pci.ids')
TOOL = os.path.join(HERE, os.pardir, os.pardir, os.pardir, os.pardir,
                    'tools', 'update-pci-ids')

#: every board issue 17 lists, (vendor, device) -> model
ISSUE_17_BOARDS = {
    ('10de', '2337'): 'H100_SXM5_64GB', ('10de', '2339'): 'H100_SXM5_94GB',
    ('10de', '2338'): 'H100_SXM5_96GB', ('10de', '233d'): 'H100_96GB',
    ('10de', '2336'): 'H100', ('10de', '2329'): 'H20',
    ('10de', '232c'): 'H20_HBM3E', ('10de', '230c'): 'H20_NVL16',
    ('10de', '230e'): 'H20_NVL16', ('10de', '2342'): 'GH200',
    ('10de', '2348'): 'GH200_144G_HBM3E', ('10de', '2909'): 'B200',
    ('10de', '2920'): 'B100', ('10de', '29bc'): 'B100',
    ('10de', '2941'): 'GB200', ('10de', '3182'): 'B300_SXM6_AC',
    ('10de', '31c2'): 'GB300',
    ('10de', '2bb5'): 'RTX_PRO_6000_BLACKWELL_SERVER_EDITION',
    ('10de', '2322'): 'H800_PCIE', ('10de', '2324'): 'H800',
    ('10de', '233a'): 'H800L_94GB', ('10de', '20bd'): 'A800_SXM4_40GB',
    ('10de', '20f3'): 'A800_SXM4_80GB', ('10de', '20f5'): 'A800_80GB_PCIE',
    ('10de', '20f6'): 'A800_40GB_PCIE', ('10de', '26b7'): 'L20',
    ('10de', '26ba'): 'L20', ('10de', '26f5'): 'L40_CNX',
    ('1002', '738e'): 'MI100', ('1002', '74a9'): 'MI300X_HF',
    ('1002', '74bd'): 'MI300X_HF', ('1002', '74b5'): 'MI300X',
    ('1002', '74a2'): 'MI308X', ('1002', '74a5'): 'MI325X',
    ('1002', '74b9'): 'MI325X', ('1002', '75a0'): 'MI350X',
    ('1002', '75a3'): 'MI355X', ('8086', '56c2'): 'FLEX_170V',
    ('8086', '0b69'): 'MAX_1450', ('8086', '0b6e'): 'MAX_1100C',
    ('8086', '0bd4'): 'MAX_1550VG',
}


class TestPciIds(testtools.TestCase):

    def test_table_spells_models_as_nvml_does(self):
        # a GPU gets the same model trait with or without NVML
        for profile in fake_nvml.PROFILES.values():
            device_id = '%04x' % (profile.pci_device_id >> 16)
            self.assertEqual(naming.normalize_model(profile.name),
                             gpu_models.model_for('10de', device_id),
                             profile.key)

    def test_every_board_of_the_issue(self):
        for key, model in ISSUE_17_BOARDS.items():
            self.assertEqual(model, gpu_models.model_for(*key), key)
        # a request for the family matches the board's model
        self.assertTrue(naming.model_matches('MI300X',
                                             gpu_models.model_for('1002',
                                                               '74a9')))

    def test_older_models_stay(self):
        models = set(gpu_models.PCI_MODELS.values())
        for model in ('A100_80GB_PCIE', 'H100_80GB_HBM3', 'H200', 'B200',
                      'L40S', 'L4', 'TESLA_T4', 'A10', 'A30', 'MI210',
                      'MI250X', 'MI300X', 'FLEX_170', 'MAX_1550'):
            self.assertIn(model, models)
        for model in models:
            self.assertEqual(model, naming.normalize_model(model))

    def test_ambiguous_ids_and_subsystems(self):
        self.assertIn(('1002', '740c'), gpu_models.AMBIGUOUS)
        self.assertIsNone(gpu_models.model_for('1002', '740c'))
        self.assertIsNone(gpu_models.model_for('10de', '25b6'))
        self.assertEqual('A16', gpu_models.model_for('10de', '25b6', '0x10de',
                                                  '0x14a9'))
        self.assertEqual('A2', gpu_models.model_for('10de', '25b6', '10de',
                                                 '157e'))
        self.assertIsNone(gpu_models.model_for('10de', '25b6', '10de', '0000'))
        self.assertTrue(gpu_models.is_known('0x10DE', '25B6'))
        self.assertFalse(gpu_models.is_known('10de', '22a3'))  # an NVSwitch

    def test_lookup_spellings(self):
        self.assertEqual('A100_80GB_PCIE', gpu_models.model_for('0x10DE',
                                                             '0x20B5'))
        self.assertIsNone(gpu_models.model_for('10de', 'ffff'))
        self.assertIsNone(gpu_models.model_for(None, None))

    def test_table_records_its_pci_ids_version(self):
        self.assertRegex(gpu_device_ids.PCI_IDS_VERSION,
                         r'^\d{4}\.\d\d\.\d\d$')
        self.assertEqual(gpu_models.PCI_IDS_VERSION,
                         gpu_device_ids.PCI_IDS_VERSION)

    def test_product_string_fallback(self):
        self.assertEqual('A2_A16', gpu_models.model_from_product(
            'GA107GL [A2 / A16]'))
        self.assertEqual('RADEON_PRO_W7900', gpu_models.model_from_product(
            'AMD Radeon PRO W7900'))
        self.assertIsNone(gpu_models.model_from_product(None))


class TestUpdatePciIds(testtools.TestCase):

    def read_fixture(self):
        with open(FIXTURE, encoding='utf-8') as f:
            return f.read()

    def test_parse_and_select(self):
        ids = pci_ids_parser.parse(self.read_fixture())
        self.assertEqual(('2099.01.02', '2099-01-02 03:04:05'),
                         (ids.version, ids.date))
        self.assertNotIn(('1022', '1480'), ids.devices)   # other vendor
        selected = pci_ids_parser.select(ids)
        self.assertEqual(
            [('1002', '740c'), ('1002', '74a1'), ('1002', '74b5'),
             ('10de', '1eb8'), ('10de', '20b5'), ('10de', '25b6'),
             ('10de', '2901'), ('10de', '2909'), ('8086', '0bd5'),
             ('8086', '56c0')], list(selected))
        self.assertEqual('TU104GL [Tesla T4]', selected[('10de', '1eb8')])

    def test_not_a_pci_ids(self):
        self.assertRaises(ValueError, pci_ids_parser.parse, 'hello\n\tworld\n')

    def test_tool_regenerates_the_table(self):
        out = os.path.join(self.useFixture(fixtures.TempDir()).path, 't.py')
        proc = subprocess.run([sys.executable, TOOL, FIXTURE, '--output',
                               out], capture_output=True, text=True)
        self.assertEqual(0, proc.returncode, proc.stderr)
        self.assertIn('10 devices from pci.ids version 2099.01.02',
                      proc.stdout)
        namespace = {}
        with open(out, encoding='utf-8') as f:
            source = f.read()
        exec(compile(source, out, 'exec'), namespace)
        self.assertEqual('2099.01.02', namespace['PCI_IDS_VERSION'])
        self.assertEqual('GB100 [HGX B200 168GB]',
                         namespace['PCI_NAMES'][('10de', '2909')])
        self.assertIn('GENERATED by tools/update-pci-ids', source)
        self.assertTrue(all(len(line) <= 79 for line in source.splitlines()))

    def test_tool_refuses_a_bad_file(self):
        bad = os.path.join(self.useFixture(fixtures.TempDir()).path, 'x')
        with open(bad, 'w') as f:
            f.write('not pci ids\n')
        proc = subprocess.run([sys.executable, TOOL, bad, '--output',
                               bad + '.py'], capture_output=True, text=True)
        self.assertEqual(2, proc.returncode)
        self.assertIn('not a pci.ids file', proc.stderr)
        self.assertNotIn('Traceback', proc.stderr)
        self.assertFalse(os.path.exists(bad + '.py'))


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
