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

"""The GPU state wire format, protocol 1.1 (design doc: State protocol).

The schemas are data (``schemas.json`` beside this module), compiled by
:mod:`fastjsonschema`.  Protocol 1.1 has two messages:

* ``facts``: everything about a host's GPUs but their health, use and
  metrics, with a ``digest`` of that content; sent when it changes and
  when a scheduler asks (``resend_gpu_state``);
* ``metrics``: every interval, per GPU (in the order of the facts the
  ``digest`` names) health, ``assigned`` and :data:`SCHEDULER_METRICS`.

Protocol 1.0 (one payload with everything) is not read any more: every
agent of this release sends 1.1.  :func:`problem` returns why a message
is rejected (None when valid); nothing here raises for bad input.
"""
import functools
import importlib.resources
import json
from typing import Any

import fastjsonschema

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
#: metric name -> (min, max): what schedulers use, in every metrics message
METRIC_RANGES = {name: (spec['minimum'], spec['maximum']) for name, spec
                 in _GPU_METRICS['metrics']['properties'].items()}
SCHEDULER_METRICS = tuple(METRIC_RANGES)
_PROFILE = _DEFS['power_profile']['anyOf']
#: the named power profiles (``[power] profiles``, ``gpu:power_profile``)
POWER_PROFILES = tuple(_PROFILE[1]['enum'])
#: a named profile or an explicit limit (250W, 80%)
POWER_PROFILE_PATTERN = '^(%s|%s)$' % ('|'.join(POWER_PROFILES),
                                       _PROFILE[2]['pattern'][1:-1])


def _inline(node: Any) -> Any:
    """``node`` with its ``$ref``s replaced by what they name.

    fastjsonschema makes a function call of each ``$ref``: inlined, a
    metrics message validates in about 2/3 of the time.
    """
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
    return fastjsonschema.compile(schema)


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


def problem(message: Any, max_gpus: int) -> str | None:
    """Why ``message`` is not a valid state message; None when it is.

    :param max_gpus: ``[gpu_scheduler] max_gpus_per_host``.
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
    try:
        _validator(kind, max_gpus)(message)
    except fastjsonschema.JsonSchemaValueException as exc:
        return str(exc)[:300]
    gpus = message['gpus']
    # What JSON Schema cannot say.  NaN: JSON has none but Python's decoder
    # (the RPC layer's) accepts it, and it passes every bound; the float
    # fields are generated_at and the metrics (extra keys take no floats).
    if message['generated_at'] != message['generated_at']:
        return 'data.generated_at must be a number, got NaN'
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
