# SPDX-License-Identifier: Apache-2.0

"""Scenario 8: nova-api validates the gpu: extra specs with our validators.

The validators are found the way nova-api finds them: the
``nova.api.extra_spec_validators`` entry point ``gpu`` of our installed
package, loaded by Nova's ``load_validators``; nothing is patched here.
"""
from nova.api.validation.extra_specs import validators as es_validators
from nova.tests.functional.api import client
from nova.tests.functional import integrated_helpers

GOOD = {
    'gpu:model': 'A100',
    'gpu:vendor': 'nvidia',
    'gpu:mode': 'vgpu',
    'gpu:vgpu_type': 'nvidia-471,A100D-10C',
    'gpu:memory_min': '16GB',
    'gpu:cuda_cc_min': '8.0',
    'gpu:driver_min': '550.54.15',
    'gpu:health': 'degraded_ok',
    'gpu:intra_host_policy': 'spread',
}

GOOD_VARIANTS = [
    ('gpu:model', 'A100_80GB_PCIE,L4'),
    ('gpu:mode', 'passthrough'),
    ('gpu:memory_min', '8192'),
    ('gpu:memory_min', '10GiB'),
    ('gpu:memory_min', '20480MiB'),
    ('gpu:health', 'any'),
    ('gpu:health', 'healthy'),
    ('gpu:intra_host_policy', 'least_loaded'),
    ('gpu:cuda_cc_min', '9.0'),
    ('gpu:vendor', 'amd'),
]

TYPOS = ['gpu:modle', 'gpu:memory_minimum', 'gpu:Model', 'gpu:cuda_cc',
         'gpu:']

BAD_VALUES = [
    ('gpu:vendor', 'nvida'),
    ('gpu:mode', 'vgpux'),
    ('gpu:memory_min', 'lots'),
    ('gpu:memory_min', '16TBs'),
    ('gpu:cuda_cc_min', 'eight'),
    ('gpu:driver_min', '550.x'),
    ('gpu:health', 'fine'),
    ('gpu:intra_host_policy', 'random'),
    ('gpu:model', 'A100;L4'),
]


class GpuExtraSpecValidationTest(integrated_helpers._IntegratedTestBase):
    microversion = 'latest'
    ADMIN_API = True

    def test_validators_loaded_from_entry_point(self):
        self.assertIn('gpu', es_validators.NAMESPACES)
        for key in GOOD:
            self.assertIn(key, es_validators.VALIDATORS)

    def test_accepts_good_specs(self):
        flavor = self._create_flavor(extra_spec=GOOD)
        self.assertEqual(
            GOOD, self.admin_api.get_extra_specs(flavor))
        for key, value in GOOD_VARIANTS:
            self.admin_api.put_extra_spec(flavor, key, {key: value})
            self.assertEqual(
                {key: value}, self.admin_api.get_extra_spec(flavor, key))

    def _assert_rejected(self, flavor, key, value):
        exc = self.assertRaises(
            client.OpenStackApiException, self.admin_api.post_extra_spec,
            flavor, {'extra_specs': {key: value}})
        self.assertEqual(400, exc.response.status_code, (key, value))
        return exc.response.text

    def test_rejects_misspelt_namespace_and_values_the_scheduler_refuses(
            self):
        # issue 16.5: accepted by nova-api and ignored by the scheduler
        flavor = self._create_flavor()
        for key in ('GPU:model', 'Gpu:Model', ' gpu:model'):
            text = self._assert_rejected(flavor, key, 'H100')
            self.assertIn("write 'gpu:model'", text, key)
        for key, value in (('gpu:vendor', 'NVIDIA'), ('gpu:mode', 'VGPU'),
                           ('gpu:health', 'HEALTHY'),
                           ('gpu:intra_host_policy', 'Spread'),
                           ('gpu:health', 'degraded_ok ')):
            self._assert_rejected(flavor, key, value)

    def test_rejects_typos(self):
        flavor = self._create_flavor()
        for key in TYPOS:
            text = self._assert_rejected(flavor, key, '1')
            self.assertIn(key, text)
        self.assertEqual(
            {}, self.admin_api.get_extra_specs(flavor))

    def test_rejects_bad_values_naming_key_and_value(self):
        flavor = self._create_flavor()
        for key, value in BAD_VALUES:
            text = self._assert_rejected(flavor, key, value)
            # the message names the key and the value
            # (design doc: Flavor extra specs)
            self.assertIn(key, text, (key, value))
            self.assertIn(value, text, (key, value))
            # ... and what is allowed
            self.assertIn('Allowed', text, (key, value))
        self.assertEqual(
            {}, self.admin_api.get_extra_specs(flavor))

    def test_no_validation_before_2_86(self):
        # Nova validates extra specs from microversion 2.86 on only.
        flavor = self._create_flavor()
        self.admin_api.microversion = '2.85'
        self.admin_api.post_extra_spec(
            flavor, {'extra_specs': {'gpu:modle': 'A100'}})
        self.admin_api.microversion = '2.86'
        self._assert_rejected(flavor, 'gpu:modle', 'A100')
