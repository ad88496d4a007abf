# SPDX-License-Identifier: Apache-2.0

"""gpu:power_profile: the request rule, nova-api's validator, the filter."""
from nova import exception as nova_exception

from gpu_nova_ext.api import extra_specs
from gpu_nova_ext.scheduler.filters import facts
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

VGPU = {'resources:VGPU': '1'}


def _with_profile(host, i, profile):
    gpu = no.gpu_state(host, i)
    if profile is not None:
        gpu['power_profile'] = profile
    return gpu


class TestPowerProfileFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        self.add_host('eff', [_with_profile('eff', 0, 'efficiency')])
        self.add_host('max', [_with_profile('max', 0, 'max-performance')])
        self.add_host('none', [_with_profile('none', 0, None)])
        # one GPU of each: only the efficient one's candidate stays
        self.add_host('mixed', [_with_profile('mixed', 0, 'efficiency'),
                                _with_profile('mixed', 1, 'balanced')])

    def _run(self, specs):
        hosts = [no.host_state(h, allocation_candidates=no.candidates(
            h, [0, 1] if h == 'mixed' else [0]))
            for h in ('eff', 'max', 'none', 'mixed')]
        spec = no.request_spec(dict(VGPU, **specs))
        return {h.host: h for h in no.run_filters(
            [facts.GpuPowerProfileFilter()], hosts, spec)}

    def test_only_gpus_under_the_profile(self):
        passed = self._run({'gpu:power_profile': 'efficiency'})
        self.assertEqual(['eff', 'mixed'], sorted(passed))
        cands = passed['mixed'].allocation_candidates
        self.assertEqual(1, len(cands))
        self.assertIn(no.rp_uuid('mixed', no.pci(0)), cands[0]['allocations'])

    def test_without_the_key_everything_passes(self):
        self.assertEqual(4, len(self._run({})))

    def test_bad_value_rejects_without_raising(self):
        self.assertEqual({}, self._run({'gpu:power_profile': 'turbo'}))


class TestRule(base.PluginTestCase):

    def test_parser_and_validator_agree(self):
        validator = {v.name: v for v in extra_specs.VALIDATORS}[
            'gpu:power_profile']
        parse = request.KEYS['gpu:power_profile'].parse
        for good in ('balanced', 'max-performance', '250W', '80%'):
            self.assertEqual(good, parse(good))
            validator.validate('gpu:power_profile', good)
        for bad in ('Balanced', 'turbo', '250', ' 80%'):
            self.assertRaises(ValueError, parse, bad)
            exc = self.assertRaises(nova_exception.ValidationError,
                                    validator.validate,
                                    'gpu:power_profile', bad)
            self.assertIn("extra spec 'gpu:power_profile'", str(exc))
