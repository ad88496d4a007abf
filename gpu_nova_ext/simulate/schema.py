# SPDX-License-Identifier: Apache-2.0

"""The scenario schema: ``scenario_schema.yaml``, validated by jsonschema.

Design doc: Simulator.  The schema file is data (published in the docs
as it is); this module loads it once, fills the ``x-enum-from`` (and
``x-const-from``, ``x-minimum-from``, ``x-maximum-from``) keywords from
their one definition in the code, and turns the most relevant validation
error (:func:`jsonschema.exceptions.best_match`) into one
:class:`gpu_nova_ext.exception.ScenarioError` line naming the file, the
entry as a path (``hosts[2].gpus[0].model``) and the fix.

The checks a schema cannot express (cross-references between entries,
the agent's and oslo.config's own parsers) are in the modules that read
each key, after :func:`validate`, through :class:`Source`.
"""
import dataclasses
import functools
import importlib
import importlib.resources
import math
import re
from typing import Any


from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import reservation
from gpu_nova_ext import safe_yaml

#: The schema file, package data beside this module.
SCHEMA_FILE = 'scenario_schema.yaml'
#: ``x-<keyword>-from`` -> the JSON Schema keyword the loader sets.
INJECTED = ('enum', 'const', 'minimum', 'maximum')
#: A key written ``.key`` in an entry path; others are ``[key]``.
_PLAIN_KEY = re.compile(r'[A-Za-z_][A-Za-z0-9_]*')
_TYPE_WORDS = {'object': 'a mapping (key: value)', 'array': 'a list',
               'string': 'a string', 'integer': 'an integer',
               'number': 'a finite number', 'boolean': 'true or false',
               'null': 'nothing'}


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """The scenario file being read: its errors name it."""

    path: str

    def fail(self, entry: str, reason: str) -> exception.ScenarioError:
        return exception.ScenarioError(file=self.path, entry=entry,
                                       reason=reason)


def _resolve(dotted: str) -> Any:
    """``package.module.NAME[.attr...]`` -> that object."""
    parts = dotted.split('.')
    for cut in range(len(parts) - 1, 0, -1):
        try:
            value = importlib.import_module('.'.join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            value = getattr(value, attr)
        return value
    raise ImportError(dotted)


def _inject(node: Any) -> Any:
    """The schema with every ``x-<keyword>-from`` filled in."""
    if isinstance(node, list):
        return [_inject(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _inject(value) for key, value in node.items()}
    for keyword in INJECTED:
        source = out.get('x-%s-from' % keyword)
        if source is not None:
            value = _resolve(source)
            if isinstance(value, (tuple, list, dict)):
                value = list(value)
            out[keyword] = value
    return out


def _finite(checker, instance) -> bool:
    return (isinstance(instance, (int, float))
            and not isinstance(instance, bool)
            and math.isfinite(instance))


def _whole(checker, instance) -> bool:
    return isinstance(instance, int) and not isinstance(instance, bool)


def _pci_address(instance: Any) -> bool:
    naming.normalize_pci_address(str(instance))
    return True


def _project_id(instance: Any) -> bool:
    if isinstance(instance, str):
        reservation.check_project_format(instance)
    return True


@functools.cache
def schema() -> dict:
    """The scenario schema, its injected values filled in."""
    text = importlib.resources.files(__package__).joinpath(
        SCHEMA_FILE).read_text(encoding='utf-8')
    return _inject(safe_yaml.load(text))


@functools.cache
def _validator():
    # jsonschema is the simulator extra's: imported when a scenario is
    # checked, so gpu-nova-ext starts on a compute host without it
    import jsonschema
    # the schema itself is checked against its meta-schema by the unit
    # tests (test_scenario_schema), not on every run
    base = jsonschema.validators.validator_for(schema())
    # number: finite only (NaN and infinity would poison every sum);
    # integer: written without a fraction (1.0 is a mistake, not a count)
    types = base.TYPE_CHECKER.redefine_many(
        {'number': _finite, 'integer': _whole})
    cls = jsonschema.validators.extend(base, type_checker=types)
    formats = jsonschema.FormatChecker(formats=())
    formats.checks('pci-address', raises=ValueError)(_pci_address)
    formats.checks('project-id', raises=exception.InvalidArgument)(
        _project_id)
    return cls(schema(), format_checker=formats)


def definition(name: str) -> dict:
    """One ``$defs`` entry of the schema (e.g. ``name``)."""
    return schema()['$defs'][name]


def entry_path(path) -> str:
    """``['hosts', 2, 'gpus', 0]`` -> ``hosts[2].gpus[0]``."""
    out = ''
    for part in path:
        if isinstance(part, int):
            out += '[%d]' % part
        elif _PLAIN_KEY.fullmatch(str(part)):
            out += ('.' if out else '') + str(part)
        else:
            out += '[%s]' % part
    return out or 'top level'


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a message stays one readable line."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'


def kind(value: Any) -> str:
    """A value as an error message shows it."""
    if value is None:
        return 'nothing'
    return '%s %s' % (type(value).__name__, _shown(value))


def _number(value: Any) -> str:
    return '%g' % value if isinstance(value, float) else str(value)


def _reason(error) -> str:
    """What is wrong and the fix, in words."""
    keyword, value = error.validator, error.validator_value
    inst = error.instance
    sub = error.schema if isinstance(error.schema, dict) else {}
    fix = sub.get('description')
    if keyword == 'additionalProperties':
        allowed = list(sub.get('properties', ()))
        extra = [k for k in inst if k not in allowed]
        return ('unknown key %r. Allowed keys: %s. Fix the spelling or '
                'remove it.' % (extra[0], ', '.join(allowed)))
    if keyword == 'enum' and 'propertyNames' in error.absolute_schema_path:
        return ('unknown key %r. Allowed keys: %s. Fix the spelling or '
                'remove it.' % (_shown(inst), ', '.join(map(str, value))))
    if keyword == 'required':
        missing = [k for k in value if k not in inst]
        reason = 'missing required key %r' % missing[0]
    elif keyword == 'type':
        types = [value] if isinstance(value, str) else value
        reason = 'expected %s, got %s' % (
            ' or '.join(_TYPE_WORDS[t] for t in types), kind(inst))
    elif keyword == 'enum':
        reason = '%s is not one of %s' % (_shown(inst),
                                          ', '.join(map(str, value)))
    elif keyword == 'const':
        reason = '%r is not %r' % (inst, value)
    elif keyword == 'minimum':
        reason = 'must be at least %s, got %s' % (_number(value),
                                                  _number(inst))
    elif keyword == 'exclusiveMinimum':
        reason = 'must be above %s, got %s' % (_number(value),
                                               _number(inst))
    elif keyword == 'maximum':
        reason = 'must be at most %s, got %s' % (_number(value),
                                                 _number(inst))
    elif keyword in ('minItems', 'minProperties'):
        reason = 'expected at least %d %s' % (
            value, 'entry' if value == 1 else 'entries')
    elif keyword == 'format' and error.cause is not None:
        cause = error.cause
        # the project's own parser says what is wrong and the fix
        return (cause.format_message() if isinstance(
            cause, exception.GpuNovaExtException) else str(cause))
    elif fix:
        # pattern, lengths, not, oneOf, anyOf, maxProperties: the
        # schema's own words say what it wants
        return ('%s is not %s' % (_shown(inst), fix)
                if keyword in ('pattern', 'minLength', 'maxLength')
                else fix)
    else:
        return error.message
    return '%s; %s' % (reason, fix) if fix else reason


def validate(data: Any, path: str, key: str | None = None) -> Source:
    """Validate parsed scenario data against the schema.

    ``key``: ``data`` is the value of that top-level key only (e.g. a
    ``nova_conf:`` with ``--compare`` overrides on it).

    :raises ScenarioError: the most relevant error, one line.
    :returns: the :class:`Source` the checks after the schema fail with.
    """
    src = Source(path)
    validator = _validator()
    errors = (validator.iter_errors(data) if key is None else
              validator.descend(data, schema()['properties'][key],
                                path=key, schema_path=key))
    from jsonschema import exceptions as js_exceptions
    error = js_exceptions.best_match(errors)
    if error is None:
        return src
    entry = list(error.absolute_path)
    if (error.validator not in ('additionalProperties', 'enum', 'required')
            and 'propertyNames' in error.absolute_schema_path):
        entry.append(error.instance)     # a bad key: name it
    raise src.fail(entry_path(entry), _reason(error))
