# SPDX-License-Identifier: Apache-2.0

"""nova-api validators for the ``gpu:`` flavor extra specs.

See the design doc (doc/source/contributor): Flavor extra specs.

Loaded by nova-api through the ``nova.api.extra_spec_validators`` entry
point ``gpu``.  With microversion 2.86 or later nova-api then rejects a
``gpu:`` key that is not listed here and a value that the scheduler's
parser (:mod:`gpu_nova_ext.scheduler.request`) would not accept, with a
message naming the key, the value and what is allowed.

Each validator is generated from the key's entry in
:data:`gpu_nova_ext.scheduler.request.KEYS` and runs the scheduler's own
parser, the one rule for a value (so the API and the filters can never
disagree: ``NVIDIA`` or ``degraded_ok `` is refused by both); it carries
Nova's ``value`` schema (the key's ``enum`` or ``pattern``, which Nova's
API reference renders).  Keys in a misspelt namespace (``GPU:model``,
`` gpu:model``), which the scheduler would refuse too, are rejected with
the right spelling.
"""
import dataclasses
import typing as ty

from nova.api.validation.extra_specs import base
from nova import exception

from gpu_nova_ext.scheduler import request


@dataclasses.dataclass
class GpuExtraSpecValidator(base.ExtraSpecValidator):
    """An ExtraSpecValidator whose errors name key, value and fix."""

    parser: ty.Callable[[str], ty.Any] | None = None
    allowed: str = ''

    def validate(self, name, value):
        right = request.misspelt(name)
        if right is not None:
            raise exception.ValidationError(detail=(
                "Validation failed; extra spec '%s' is in a misspelt gpu: "
                "namespace: write '%s'." % (name, right)))
        if self.parser is None:
            # the catch-all for unknown gpu: keys
            raise exception.ValidationError(detail=(
                "Validation failed; extra spec '%s' is not a known gpu: "
                "extra spec. Known keys: %s." % (
                    name, ', '.join(sorted(request.KEYS)))))
        try:
            self.parser(value)
            # Nova's own schema check as well (pattern/enum)
            super().validate(name, value)
        except (ValueError, TypeError, exception.ValidationError):
            raise exception.ValidationError(detail=(
                "Validation failed; invalid value %r for extra spec '%s'. "
                "Allowed: %s." % (value, name, self.allowed)))


def describe(key: request.Key) -> str:
    """The key's help, with what each enumerated value means."""
    text = key.help + '.'
    if key.values:
        text += ' Values: %s.' % '; '.join(
            '%s (%s)' % (value, meaning.rstrip('.')) if meaning else value
            for value, meaning in key.values)
    return text


def validator(key: request.Key) -> GpuExtraSpecValidator:
    """The nova-api validator of one registry key."""
    if key.values:
        schema = {'type': str, 'enum': list(key.choices)}
    else:
        schema = {'type': str, 'pattern': key.pattern,
                  'description': key.allowed}
    return GpuExtraSpecValidator(
        name=key.name, description=describe(key), value=schema,
        parser=key.parse, allowed=key.rule)


VALIDATORS = [validator(key) for key in request.KEYS.values()]

# Nova looks a key up by exact name first, so this only meets unknown keys.
UNKNOWN = GpuExtraSpecValidator(
    name='gpu:{key}',
    description='Any other gpu: key is rejected.',
    value={'type': str},
    parameters=[{'name': 'key', 'pattern': r'.*',
                 'description': 'an unknown key'}],
    parser=None)


# Keys in a namespace that is gpu but for case or blanks; Nova tries
# validators in order, so the right namespace never gets here.
MISSPELT = GpuExtraSpecValidator(
    name='{namespace}:{key}',
    description='A gpu: key in a misspelt namespace (GPU:, Gpu:, " gpu:") '
                'is rejected with the right spelling.',
    value={'type': str},
    parameters=[{'name': 'namespace', 'pattern': r'\s*[gG][pP][uU]\s*',
                 'description': 'gpu, misspelt'},
                {'name': 'key', 'pattern': r'.*',
                 'description': 'any key'}],
    parser=None)


def register() -> list[base.ExtraSpecValidator]:
    """Nova's entry point: the validators of the ``gpu`` namespace."""
    return VALIDATORS + [UNKNOWN, MISSPELT]
