# SPDX-License-Identifier: Apache-2.0

"""Reading nova.conf's [devices] / [mdev_*] for the offered vGPU type."""
import testtools

from gpu_nova_ext.inventory import nova_config
from gpu_nova_ext.tests.unit.inventory import helpers


class TestNovaConfig(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(helpers.AgentConf())

    def test_missing_files_mean_nothing_enabled(self):
        cfg = nova_config.load(self.fixture.conf)
        self.assertEqual([], cfg.enabled_types)
        self.assertIsNone(cfg.type_for(['0000:3b:00.0']))

    def test_one_type_without_addresses_applies_everywhere(self):
        self.fixture.write_nova_conf(
            '[DEFAULT]\nhost = cmp-1\n[devices]\n'
            'enabled_mdev_types = nvidia-471\n')
        cfg = nova_config.load(self.fixture.conf)
        self.assertEqual('nvidia-471', cfg.type_for(['0000:86:00.0']))

    def test_dropin_overrides_and_addresses_normalized(self):
        self.fixture.write_nova_conf(
            '[devices]\nenabled_mdev_types = nvidia-222\n')
        self.fixture.write_nova_conf(
            '[devices]\nenabled_mdev_types = nvidia-471, nvidia-474\n'
            '[mdev_nvidia-471]\ndevice_addresses = 3B:00.0,0000:41:00.4\n'
            '[mdev_nvidia-474]\ndevice_addresses = pci_0000_86_00_0, '
            'junk\n', name='10-gpu.conf')
        cfg = nova_config.load(self.fixture.conf)
        self.assertEqual(['nvidia-471', 'nvidia-474'], cfg.enabled_types)
        self.assertEqual({'nvidia-471': ['0000:3b:00.0', '0000:41:00.4'],
                          'nvidia-474': ['0000:86:00.0']},
                         cfg.device_addresses)
        self.assertEqual('nvidia-471',
                         cfg.type_for(['0000:41:00.0', '0000:41:00.4']))
        self.assertEqual('nvidia-474', cfg.type_for(['0000:86:00.0']))
        # several types: a GPU in no device_addresses gets none
        self.assertIsNone(cfg.type_for(['0000:af:00.0']))
        self.assertEqual(2, len(cfg.files))

    def test_legacy_option_name(self):
        self.fixture.write_nova_conf(
            '[devices]\nenabled_vgpu_types = nvidia-35\n')
        self.assertEqual(['nvidia-35'],
                         nova_config.load(self.fixture.conf).enabled_types)

    def test_unparsable_file_is_ignored(self):
        self.fixture.write_nova_conf('[devices\nenabled_mdev_types = x\n')
        self.assertEqual([],
                         nova_config.load(self.fixture.conf).enabled_types)
