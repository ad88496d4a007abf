# SPDX-License-Identifier: Apache-2.0

"""The GPU state wire format, protocol 1.1 (design doc: State protocol).

The schemas are data (``schemas.json`` beside this module), compiled by
``jsonschema_rs``; the messages (``facts`` and ``metrics``), the
validator's choice and the version history are the design doc's.
:func:`problem` returns why a message is rejected (None when valid);
nothing here raises for bad input.
"""
import functools
import importlib.resources
import json
from typing import Any

import jsonschema_rs

VERSION = '1.1'
FACTS = 'facts'
METRICS = 'metrics'
KINDS = (FACTS, METRICS)

SCHEMAS = json.loads(importlib.resources.files(__package__).joinpath(
    'schemas.json').read_text(encoding='utf-8'))
_DEFS = SCHEMAS['definitions']
_GPU_METRICS = _DEFS['gpu_metrics']['properties']

HEALTH_STATES = tuple(_GPU_METRICS['health']['properties']['state']['enum'])
#: health state -> rank (filters compare ranks)
HEALTH_RANK = {state: rank for rank, state in enumerate(HEALTH_STATES)}
#: the metrics schedulers use, in every metrics message
SCHEDULER_METRICS = tuple(_GPU_METRICS['metrics']['properties'])
_PROFILE = _DEFS['power_profile']['anyOf']
#: the named power profiles (``[power] profiles``, ``gpu:power_profile``)
POWER_PROFILES = tuple(_PROFILE[1]['enum'])
#: a named profile or an explicit limit (250W, 80%)
POWER_PROFILE_PATTERN = '^(%s|%s)$' % ('|'.join(POWER_PROFILES),
                                       _PROFILE[2]['pattern'][1:-1])


def _inline(node: Any) -> Any:
    """``node`` with its ``$ref``s inlined (validated in half the time)."""
    if isinstance(node, list):
        return [_inline(item) for item in node]
    if not isinstance(node, dict):
        return node
    if '$ref' in node:
        return _inline(_DEFS[node['$ref'].rpartition('/')[2]])
    return {k: _inline(v) for k, v in node.items() if k != '$comment'}


@functools.lru_cache(maxsize=8)
def _validator(kind: str, max_gpus: int) -> Any:
    """The compiled schema of ``kind`` for ``max_gpus_per_host``."""
    schema = _inline(SCHEMAS[kind])
    schema['properties']['gpus']['maxItems'] = max_gpus
    return jsonschema_rs.validator_for(schema)


def host_of(message: Any) -> str:
    """The host a message names, for log lines (never raises)."""
    host = message.get('host') if isinstance(message, dict) else None
    return host[:255] if isinstance(host, str) and host else '<unknown host>'


def kind_of(message: Any) -> str | None:
    """``facts`` or ``metrics`` for a message this scheduler reads."""
    if message.__class__ is dict and message.get('version') == VERSION:
        kind = message.get('kind')
        if kind in KINDS:
            return kind
    return None


def _reason(error: jsonschema_rs.ValidationError) -> str:
    """``data.gpus[0].health.state: "sick" is not one of ...``, short.

    The validator's message starts with the value: a whole GPU list for
    ``maxItems``; past a line, the keyword and its limit say it instead.
    """
    where = 'data' + ''.join('[%d]' % p if isinstance(p, int) else '.%s' % p
                             for p in error.instance_path)
    text = error.message
    if len(text) > 120:
        limit = getattr(error.kind, 'limit', None)
        text = 'fails %s%s' % (error.schema_path[-1],
                               '' if limit is None else ' %s' % limit)
    return '%s: %s' % (where, text)


def problem(message: Any, max_gpus: int) -> str | None:
    """Why ``message`` is no valid state message (None: it is one).

    ``max_gpus``: ``[gpu_scheduler] max_gpus_per_host``.
    """
    kind = kind_of(message)
    if kind is None:
        if not isinstance(message, dict):
            return 'a state message must be an object, got %s' % (
                type(message).__name__)
        return ('state protocol %r, kind %r is not read here (this '
                'scheduler reads protocol %s facts and metrics): upgrade '
                'gpu-nova-agent on that host, or the scheduler plugins'
                % (message.get('version'), message.get('kind'), VERSION))
    # NaN: JSON has none but Python's decoder (the RPC layer's) accepts it;
    # the validator reads it as null, which the metrics may be.  The float
    # fields are generated_at and the metrics (extra keys take no floats).
    if message.get('generated_at') != message.get('generated_at'):
        return 'data.generated_at must be a number, got NaN'
    validator = _validator(kind, max_gpus)
    try:
        if not validator.is_valid(message):
            return _reason(next(validator.iter_errors(message)))
    except ValueError as exc:   # what has no JSON form (a key not a string)
        return 'not JSON: %s' % str(exc)[:200]
    gpus = message['gpus']
    if kind == METRICS:
        for i, gpu in enumerate(gpus):
            for name, value in (gpu.get('metrics') or {}).items():
                if value != value:
                    return ('data.gpus[%d].metrics.%s must be a number, '
                            'got NaN' % (i, name))
        return None
    # uniqueItems compares whole items: a PCI address listed twice
    addresses = [gpu['pci_address'] for gpu in gpus]
    if len(set(addresses)) != len(addresses):
        return 'data.gpus lists a pci_address twice: %s' % sorted(
            a for a in set(addresses) if addresses.count(a) > 1)[0]
    return None
