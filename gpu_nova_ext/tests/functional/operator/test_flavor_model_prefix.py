# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu flavor create --model <prefix>`` against Nova's real API
and Placement (issue 39): a prefix that names exactly one GPU model offered
in Placement is resolved to it; one naming several is refused, naming them;
and every value of every enumerated ``gpu:`` key passes nova-api's
validators as flavor create writes it."""
from nova.tests.functional import integrated_helpers

from gpu_nova_ext.operator import flavor
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.functional import osc_client


class ModelPrefixTest(integrated_helpers._IntegratedTestBase):

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud.of_harness(self))

    def _offer(self, *classes):
        for rc in classes:
            self.placement.post('/resource_classes', {'name': rc},
                                version='1.2')

    def _specs(self, name):
        body = self.admin_api.api_get('/flavors/detail?is_public=None').body
        [made] = [f for f in body['flavors'] if f['name'] == name]
        return self.admin_api.get_extra_specs(made['id'])

    def test_one_match_resolves(self):
        self._offer('CUSTOM_VGPU_A100_80GB_PCIE', 'CUSTOM_VGPU_L4')
        shown = osc_client.openstack_json(
            self, 'gpu', 'flavor', 'create', 'vgpu.a100', '--model', 'A100',
            '--exact-model')
        self.assertEqual('CUSTOM_VGPU_A100_80GB_PCIE', shown['quota_class'])
        self.assertEqual(
            {'resources:CUSTOM_VGPU_A100_80GB_PCIE': '1',
             'trait:CUSTOM_GPU_MODEL_A100_80GB_PCIE': 'required',
             'gpu:model': 'A100_80GB_PCIE', 'gpu:mode': 'vgpu'},
            self._specs('vgpu.a100'))

    def test_two_matches_refused_naming_both(self):
        self._offer('CUSTOM_VGPU_H100_80GB_HBM3', 'CUSTOM_VGPU_H100_NVL')
        line = osc_client.refused(self, 'gpu', 'flavor', 'create',
                                  'vgpu.h100', '--model', 'H100')
        self.assertIn('H100_80GB_HBM3, H100_NVL', line)
        body = self.admin_api.api_get('/flavors/detail?is_public=None').body
        self.assertNotIn('vgpu.h100', [f['name'] for f in body['flavors']])

    def test_every_enumerated_value_is_created(self):
        self._offer('CUSTOM_VGPU_A100_80GB_PCIE')
        n = 0
        for key in request.KEYS.values():
            for value in key.choices:
                n += 1
                name = 'f%d' % n
                option = '--' + flavor.attribute(key).replace('_', '-')
                argv = [name, '--model', 'A100_80GB_PCIE', option, value]
                if value == 'passthrough':
                    argv += ['--alias', 'a100']
                osc_client.openstack_json(self, 'gpu', 'flavor', 'create',
                                          *argv)
                self.assertEqual(value, self._specs(name)[key.name])
