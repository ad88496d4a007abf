# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""``gpu-nova-ext flavor create`` end to end: openstacksdk against Nova's
real API served by Nova's functional harness (wsgi-intercept), with the
gpu: validators loaded from our entry point."""
import argparse

from nova.tests.functional import integrated_helpers

from gpu_nova_ext.cmd import flavor as flavor_cmd
from gpu_nova_ext import exception
from gpu_nova_ext.tests.functional.operator import sdk


def parse(argv):
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    flavor_cmd.register(sub)
    return parser.parse_args(['flavor', 'create'] + argv)


class FlavorCreateTest(integrated_helpers._IntegratedTestBase):
    microversion = 'latest'
    ADMIN_API = True

    def _connect(self, cloud):
        return sdk.harness_connection(self)

    def _create(self, argv):
        args = parse(argv)
        return flavor_cmd.run(args, None, conn_factory=self._connect)

    def _flavor(self, name):
        body = self.admin_api.api_get('/flavors/detail?is_public=None').body
        for f in body['flavors']:
            if f['name'] == name:
                return f
        return None

    def test_vgpu_flavor_created_with_specs(self):
        rc = self._create(['vgpu.a100', '--model', 'A100', '--count', '1',
                           '--vgpu-type', 'A100D-10C', '--memory-min',
                           '10GB', '--vcpus', '8', '--ram', '32768',
                           '--disk', '40', '--mig', '--vgpu-class',
                           'vgpu'])
        self.assertEqual(0, rc)
        made = self._flavor('vgpu.a100')
        self.assertEqual((8, 32768, 40),
                         (made['vcpus'], made['ram'], made['disk']))
        self.assertEqual(
            {'resources:VGPU': '1', 'gpu:model': 'A100', 'gpu:mode': 'vgpu',
             'gpu:vgpu_type': 'A100D-10C', 'gpu:memory_min': '10GB',
             'trait:CUSTOM_GPU_MIG_ENABLED': 'required'},
            self.admin_api.get_extra_specs(made['id']))

    def test_per_model_vgpu_class_must_exist(self):
        # no host offers CUSTOM_VGPU_A100 (a prefix, not a model): refused
        exc = self.assertRaises(exception.GpuNovaExtException, self._create,
                                ['vgpu.a100', '--model', 'A100'])
        self.assertIn('No host offers resource class CUSTOM_VGPU_A100, so '
                      "flavor 'vgpu.a100' would land nowhere", str(exc))
        self.assertIsNone(self._flavor('vgpu.a100'))
        # once a host offers the model's class, the flavor is made
        self.placement.post('/resource_classes',
                            {'name': 'CUSTOM_VGPU_A100_80GB_PCIE'},
                            version='1.2')
        exc = self.assertRaises(exception.GpuNovaExtException, self._create,
                                ['vgpu.a100', '--model', 'A100'])
        self.assertIn('GPU classes in Placement: A100_80GB_PCIE (vgpu)',
                      str(exc))
        self.assertEqual(0, self._create(['vgpu.a100', '--model',
                                          'A100_80GB_PCIE']))
        self.assertEqual(
            {'resources:CUSTOM_VGPU_A100_80GB_PCIE': '1',
             'gpu:model': 'A100_80GB_PCIE', 'gpu:mode': 'vgpu'},
            self.admin_api.get_extra_specs(self._flavor('vgpu.a100')['id']))

    def test_passthrough_flavor(self):
        self.assertEqual(0, self._create(
            ['pt.a100x2', '--model', 'A100_80GB_PCIE', '--count', '2',
             '--mode', 'passthrough', '--exact-model', '--private']))
        made = self._flavor('pt.a100x2')
        self.assertFalse(made['os-flavor-access:is_public'])
        specs = self.admin_api.get_extra_specs(made['id'])
        self.assertEqual('gpu-a100-80gb-pcie:2',
                         specs['pci_passthrough:alias'])
        self.assertEqual('required',
                         specs['trait:CUSTOM_GPU_MODEL_A100_80GB_PCIE'])

    def test_duplicate_name_refused(self):
        self._create(['dup', '--model', 'L4', '--vgpu-class', 'vgpu'])
        exc = self.assertRaises(exception.GpuNovaExtException, self._create,
                                ['dup', '--model', 'L4'])
        self.assertIn("'dup' exists already", str(exc))

    def test_rejected_spec_removes_flavor(self):
        # a value our CLI accepts but nova-api's validators refuse (the
        # alias-count pattern of pci_passthrough:alias)
        exc = self.assertRaises(
            exception.GpuNovaExtException, self._create,
            ['bad', '--model', 'A100_80GB_PCIE', '--mode', 'passthrough',
             '--alias', 'a:b'])
        self.assertIn("'a:b:1' is not of the format", str(exc))
        self.assertIsNone(self._flavor('bad'))
