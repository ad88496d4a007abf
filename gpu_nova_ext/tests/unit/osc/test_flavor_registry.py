# SPDX-License-Identifier: Apache-2.0

"""Every ``gpu:`` key's values through ``openstack gpu flavor create
--dry-run`` and nova-api's validator: what one accepts, the other does.

The values come from the registry (``scheduler.request.KEYS``): every
enumerated value, and each free-form key's samples.  The cloud of
clouds.yaml points at a closed port: a dry run contacts nothing.
"""
import json

from nova.api.validation.extra_specs import validators
import testtools

from gpu_nova_ext.operator import flavor
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.tests.functional import osc_client

BASE = ['gpu.test', '--model', 'A100_80GB_PCIE', '--dry-run', '-f', 'json']


def option(key: request.Key) -> str:
    return '--' + flavor.attribute(key).replace('_', '-')


class TestEveryValue(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud('http://127.0.0.1:1/placement',
                                         'http://127.0.0.1:1/compute'))

    def dry_run(self, *argv: str) -> dict:
        rc, out, err = osc_client.openstack('gpu', 'flavor', 'create',
                                            *BASE, *argv)
        self.assertEqual(0, rc, '%s: %s' % (' '.join(argv), err))
        return json.loads(out)['extra_specs']

    def test_every_value_is_accepted_by_cli_and_api(self):
        walked = []
        for key in request.KEYS.values():
            values = key.choices or key.examples
            self.assertTrue(values, key.name)
            for value in values:
                # the API takes the value as the operator spells it...
                validators.validate(key.name, value)
                if key.name == 'gpu:model' and ',' in value:
                    continue  # flavor create names one model
                # ... and so does flavor create, which writes it in a
                # spelling the API and the scheduler take as well
                specs = self.dry_run(option(key), value)
                written = specs[key.name]
                validators.validate(key.name, written)
                self.assertEqual(key.parse(value), key.parse(written))
                for name, spec in specs.items():
                    if name.startswith(request.PREFIX):
                        validators.validate(name, spec)
                self.assertEqual(
                    (), request.parse_extra_specs(specs).errors, specs)
                walked.append((key.name, value))
        # every enumerated value was walked
        for key in request.KEYS.values():
            for value in key.choices:
                self.assertIn((key.name, value), walked)
        self.assertIn(('gpu:intra_host_policy', 'fragmentation'), walked)

    def test_choices_are_the_registrys(self):
        parser = osc_client.parser_of('gpu flavor create')
        by_option = {a.option_strings[0]: a for a in parser._actions
                     if a.option_strings}
        for key in request.KEYS.values():
            action = by_option[option(key)]
            self.assertEqual(key.choices or None,
                             tuple(action.choices) if action.choices
                             else None, key.name)

    def test_refused_value_names_the_rule(self):
        rc, out, err = osc_client.openstack(
            'gpu', 'flavor', 'create', *BASE, '--driver-min', 'r550')
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn(request.KEYS['gpu:driver_min'].rule, err)
