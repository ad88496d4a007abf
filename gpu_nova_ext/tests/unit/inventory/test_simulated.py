# SPDX-License-Identifier: Apache-2.0

"""The simulated source: YAML facts, metrics and health."""
import os

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import simulated
from gpu_nova_ext.tests.unit.inventory import helpers

YAML = """
"0000:3b:00.0":
  name: "NVIDIA A100 80GB PCIe"
  memory_mib: 81920
  driver_version: "550.54.15"
  cuda_cc: "8.0"
  uuid: GPU-1
  health: {state: degraded, reasons: [ecc]}
  metrics: {utilization_pct: 10, temperature_c: 40, power_w: 70}
  vgpu_types:
    - {id: nvidia-471, name: A100D-10C, framebuffer_mib: 10240, max: 8}
"5e:00.0":
  name: Tesla T4
  memory_mib: 15360
  cuda_cc: 7.5
  health: unhealthy
  vgpu_types: [{id: 222, name: T4-1Q, max: 16}]
"0000:86:00.0": {name: "NVIDIA L4", memory_mib: "lots"}
"0000:af:00.0": {name: "NVIDIA L4", health: sick}
"""


class TestSimulatedSource(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(helpers.AgentConf())

    def source(self, text):
        path = os.path.join(self.fixture.tmp, 'gpus.yaml')
        with open(path, 'w') as f:
            f.write(text)
        return simulated.SimulatedSource(self.fixture.conf, path=path)

    def test_shape(self):
        source = self.source(YAML)
        gpus = source.discover()
        self.assertEqual(['0000:3b:00.0', '0000:5e:00.0'], sorted(gpus))
        a100 = gpus['0000:3b:00.0']
        self.assertEqual(
            ('nvidia', 'A100_80GB_PCIE', 81920, '550.54.15', '8.0', 'GPU-1',
             base.Health('degraded', ['ecc']),
             {'utilization_pct': 10, 'temperature_c': 40, 'power_w': 70},
             ['simulated']),
            (a100.vendor, a100.model, a100.memory_mib, a100.driver_version,
             a100.cuda_cc, a100.uuid, a100.health, a100.metrics,
             a100.sources))
        self.assertEqual([base.MdevType('nvidia-471', 'A100D-10C',
                                        available=8, max=8,
                                        framebuffer_mib=10240)],
                         a100.vgpu_types)
        t4 = gpus['0000:5e:00.0']
        self.assertEqual(('TESLA_T4', None, '7.5', 'unhealthy'),
                         (t4.model, t4.vendor, t4.cuda_cc, t4.health.state))
        self.assertEqual(('nvidia-222', 1024),
                         (t4.vgpu_types[0].id,
                          t4.vgpu_types[0].framebuffer_mib))
        # one warning per bad entry, naming it
        self.assertEqual(2, len(source.warnings))
        self.assertIn('0000:86:00.0', source.warnings[0])
        self.assertIn('memory_mib', source.warnings[0])
        self.assertIn('0000:af:00.0', source.warnings[1])
        self.assertIn('sick', source.warnings[1])

    def test_gpus_key_accepted(self):
        gpus = self.source('gpus:\n  "0000:3b:00.0": {name: NVIDIA L4}\n'
                           ).discover()
        self.assertEqual('L4', gpus['0000:3b:00.0'].model)

    def test_missing_file_names_it(self):
        source = simulated.SimulatedSource(self.fixture.conf,
                                           path='/nonexistent/gpus.yaml')
        exc = self.assertRaises(exception.InventoryError, source.discover)
        self.assertIn('/nonexistent/gpus.yaml', str(exc))
        self.assertIn('simulated_gpus_file', str(exc))

    def test_not_a_mapping(self):
        exc = self.assertRaises(exception.InventoryError,
                                self.source('- a\n- b\n').discover)
        self.assertIn('mapping', str(exc))

    def test_unset_option(self):
        exc = self.assertRaises(exception.ConfigError,
                                simulated.SimulatedSource(
                                    self.fixture.conf).discover)
        self.assertIn('simulated_gpus_file', str(exc))
