# SPDX-License-Identifier: Apache-2.0

"""nova-api validators of the gpu: namespace, through Nova's registry."""
from nova.api.validation.extra_specs import validators
from nova import exception
import testtools

from gpu_nova_ext.api import extra_specs
from gpu_nova_ext.scheduler import request

GOOD = {
    'gpu:model': ['A100', 'A100_80GB_PCIE', 'a100, H100', 'L40S'],
    'gpu:vendor': ['nvidia', 'amd', 'intel'],
    'gpu:mode': ['vgpu', 'passthrough'],
    'gpu:vgpu_type': ['nvidia-471', 'A100D-10C', 'nvidia-471,nvidia-472'],
    'gpu:memory_min': ['16384', '16GB', '16GiB', '512MB', '512MiB',
                       '16 GB'],
    'gpu:cuda_cc_min': ['8.0', '9.0', '12.10'],
    'gpu:driver_min': ['550', '550.54', '550.54.15'],
    'gpu:health': ['healthy', 'degraded_ok', 'any'],
    'gpu:intra_host_policy': ['pack', 'spread', 'coolest', 'least_loaded',
                              'fragmentation'],
    'gpu:power_profile': ['max-performance', 'balanced', 'efficiency',
                          '250W', '80%', '62.5W'],
}
BAD = {
    'gpu:model': ['', 'A100,,H100', ',', '!A100'],
    'gpu:vendor': ['NVIDIA', 'matrox', ''],
    'gpu:mode': ['mig', 'VGPU', ''],
    'gpu:vgpu_type': ['', 'nvidia 471', 'a,,b'],
    'gpu:memory_min': ['', 'lots', '16TB', '1.5GB', '-1'],
    'gpu:cuda_cc_min': ['8', '8.0.1', 'x.y', ''],
    'gpu:driver_min': ['r550', '550.', '', '1.2.3.4.5'],
    'gpu:health': ['sick', 'Healthy', ''],
    'gpu:intra_host_policy': ['random', 'binpack', ''],
    'gpu:power_profile': ['turbo', '250 W', 'Balanced', ''],
}


class TestValidators(testtools.TestCase):

    def test_registered_with_nova(self):
        self.assertIn('gpu', validators.NAMESPACES)
        for key in request.KEYS:
            self.assertIn(key, validators.VALIDATORS)
        self.assertEqual(sorted(request.KEYS),
                         sorted(v.name for v in extra_specs.VALIDATORS))
        for v in extra_specs.register():
            self.assertTrue(v.description)

    def test_generated_from_the_registry(self):
        by_name = {v.name: v for v in extra_specs.VALIDATORS}
        for key in request.KEYS.values():
            v = by_name[key.name]
            self.assertIn(key.help, v.description)
            for value, meaning in key.values:
                self.assertIn(value, v.description)
                self.assertIn(meaning.rstrip('.'), v.description)
            if key.values:
                self.assertEqual(list(key.choices), v.value['enum'])
            else:
                self.assertEqual(key.pattern, v.value['pattern'])
                for value in key.examples:
                    validators.validate(key.name, value)
        # refused values are named with the registry's rule
        exc = self.assertRaises(exception.ValidationError,
                                validators.validate,
                                'gpu:intra_host_policy', 'binpack')
        self.assertIn(request.KEYS['gpu:intra_host_policy'].rule,
                      exc.format_message())
        self.assertIn('fragmentation', exc.format_message())

    def test_good_values(self):
        for key, values in GOOD.items():
            for value in values:
                validators.validate(key, value)

    def test_bad_values_name_key_value_and_allowed(self):
        for key, values in BAD.items():
            for value in values:
                exc = self.assertRaises(exception.ValidationError,
                                        validators.validate, key, value)
                msg = exc.format_message()
                self.assertIn(key, msg)
                self.assertIn(repr(value), msg)
                self.assertIn('Allowed:', msg)

    def test_api_and_scheduler_agree(self):
        for key, values in list(GOOD.items()) + list(BAD.items()):
            parser = request.KEYS[key].parse
            for value in values:
                try:
                    validators.validate(key, value)
                    api_ok = True
                except exception.ValidationError:
                    api_ok = False
                if api_ok:
                    parser(value)  # the scheduler accepts it too

    def test_unknown_key(self):
        exc = self.assertRaises(exception.ValidationError,
                                validators.validate, 'gpu:modle', 'A100')
        msg = exc.format_message()
        self.assertIn("'gpu:modle'", msg)
        self.assertIn('gpu:model', msg)

    def test_other_namespaces_untouched(self):
        validators.validate('hw:cpu_policy', 'dedicated')
        validators.validate('custom:anything', 'x')
