# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu flavor create|list|show|delete`` end to end:
python-openstackclient against Nova's real API served by Nova's functional
harness (wsgi-intercept), with the gpu: validators loaded from our entry
point."""
import json

from nova.tests.functional import integrated_helpers

from gpu_nova_ext.tests.functional import osc_client


class FlavorTest(integrated_helpers._IntegratedTestBase):
    """openstack gpu flavor create|list|show|delete, Nova's API."""

    microversion = 'latest'
    ADMIN_API = True

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud.of_harness(self))

    def _create(self, argv):
        """(rc, the created flavor as -f json shows it, stderr)."""
        rc, out, err = osc_client.openstack('gpu', 'flavor', 'create',
                                            '-f', 'json', *argv)
        return rc, json.loads(out) if rc == 0 else None, err

    def _refused(self, argv, *words):
        rc, shown, err = self._create(argv)
        self.assertEqual(2, rc, err)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        for word in words:
            self.assertIn(word, err)

    def _flavor(self, name):
        body = self.admin_api.api_get('/flavors/detail?is_public=None').body
        for f in body['flavors']:
            if f['name'] == name:
                return f
        return None

    def test_vgpu_flavor_created_with_specs(self):
        rc, shown, err = self._create(
            ['vgpu.a100', '--model', 'A100', '--count', '1',
             '--vgpu-type', 'A100D-10C', '--memory-min', '10GB', '--vcpus',
             '8', '--ram', '32768', '--disk', '40', '--mig', '--vgpu-class',
             'vgpu'])
        self.assertEqual(0, rc, err)
        made = self._flavor('vgpu.a100')
        self.assertEqual(made['id'], shown['id'])
        self.assertEqual((8, 32768, 40),
                         (made['vcpus'], made['ram'], made['disk']))
        specs = {'resources:VGPU': '1', 'gpu:model': 'A100',
                 'gpu:mode': 'vgpu', 'gpu:vgpu_type': 'A100D-10C',
                 'gpu:memory_min': '10GB',
                 'trait:CUSTOM_GPU_MIG_ENABLED': 'required'}
        self.assertEqual(specs, self.admin_api.get_extra_specs(made['id']))
        self.assertEqual('VGPU', shown['quota_class'])

        # list (GPU flavors only), show, delete
        self.admin_api.post_flavor({'flavor': {
            'name': 'plain', 'ram': 512, 'vcpus': 1, 'disk': 1}})
        listed = osc_client.openstack_json(self, 'gpu', 'flavor', 'list')
        self.assertEqual([('vgpu.a100', specs)],
                         [(f['Name'], f['GPU Specs']) for f in listed])
        shown = osc_client.openstack_json(self, 'gpu', 'flavor', 'show',
                                          'vgpu.a100')
        self.assertEqual(specs, shown['gpu_specs'])
        rc, out, err = osc_client.openstack('gpu', 'flavor', 'show',
                                            'plain')
        self.assertEqual(2, rc)
        self.assertIn('not a GPU flavor', err)
        self.assertIn('openstack flavor show', err)
        rc, out, err = osc_client.openstack('gpu', 'flavor', 'delete',
                                            'vgpu.a100')
        self.assertEqual(0, rc, err)
        self.assertIn('deleted flavor vgpu.a100', out)
        self.assertIsNone(self._flavor('vgpu.a100'))
        rc, out, err = osc_client.openstack('gpu', 'flavor', 'delete',
                                            'vgpu.a100')
        self.assertEqual(2, rc)
        self.assertIn('no such flavor', err)

    def test_per_model_vgpu_class_must_exist(self):
        # no host offers CUSTOM_VGPU_A100 nor any A100 class: refused
        self._refused(['vgpu.a100', '--model', 'A100'],
                      'no host offers resource class CUSTOM_VGPU_A100, so '
                      "flavor 'vgpu.a100' would land nowhere")
        self.assertIsNone(self._flavor('vgpu.a100'))
        self.placement.post('/resource_classes',
                            {'name': 'CUSTOM_VGPU_A100_80GB_PCIE'},
                            version='1.2')
        # a model no class matches is refused, naming the classes there
        self._refused(['vgpu.a10', '--model', 'A10'],
                      'GPU classes in Placement: A100_80GB_PCIE (vgpu)')
        # once a host offers the model's class, the prefix resolves to it
        rc, shown, err = self._create(['vgpu.a100', '--model', 'A100'])
        self.assertEqual(0, rc, err)
        self.assertEqual(
            {'resources:CUSTOM_VGPU_A100_80GB_PCIE': '1',
             'gpu:model': 'A100_80GB_PCIE', 'gpu:mode': 'vgpu'},
            self.admin_api.get_extra_specs(self._flavor('vgpu.a100')['id']))

    def test_passthrough_flavor(self):
        rc, shown, err = self._create(
            ['pt.a100x2', '--model', 'A100_80GB_PCIE', '--count', '2',
             '--mode', 'passthrough', '--exact-model', '--private'])
        self.assertEqual(0, rc, err)
        made = self._flavor('pt.a100x2')
        self.assertFalse(made['os-flavor-access:is_public'])
        specs = self.admin_api.get_extra_specs(made['id'])
        self.assertEqual('gpu-a100-80gb-pcie:2',
                         specs['pci_passthrough:alias'])
        self.assertEqual('required',
                         specs['trait:CUSTOM_GPU_MODEL_A100_80GB_PCIE'])

    def test_duplicate_name_refused(self):
        self.assertEqual(0, self._create(['dup', '--model', 'L4',
                                          '--vgpu-class', 'vgpu'])[0])
        self._refused(['dup', '--model', 'L4'], 'Invalid NAME dup',
                      'exists already')

    def test_rejected_spec_removes_flavor(self):
        # a value our CLI accepts but nova-api's validators refuse (the
        # alias-count pattern of pci_passthrough:alias)
        self._refused(['bad', '--model', 'A100_80GB_PCIE', '--mode',
                       'passthrough', '--alias', 'a:b'],
                      "'a:b:1' is not of the format")
        self.assertIsNone(self._flavor('bad'))
