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

"""The GPU state wire format, defined once (design doc: State protocol).

Both sides import this module: the agent builds its messages with the
names below, the scheduler's cache validates what arrives against the
schemas below before it stores anything.

Protocol 1.1 has two messages:

* ``facts``: everything about a host's GPUs but their metrics, health and
  use, with a ``digest`` of that content; sent when it changes and when a
  scheduler asks (``resend_gpu_state``).  Validated against the JSON
  schema below (compiled by :mod:`fastjsonschema`) once per change.
* ``metrics``: every interval, per GPU (in the order of the facts the
  ``digest`` names) health, ``assigned`` and the few metrics schedulers
  use (:data:`SCHEDULER_METRICS`).  Checked by :func:`metrics_problem`,
  one bounded loop over :data:`METRIC_RANGES` (the same table the schema
  is built from), because it arrives from every host every interval.

Protocol 1.0 (one payload with facts, health and every metric) is still
accepted: it is split into the same two parts.

Every number is bounded and finite (a JSON ``1e999`` or ``10**400`` is
refused here, never met later as an overflow); every string and list has
a maximum length.  :func:`problem` returns the reason a message is
rejected (None when valid); nothing here raises for bad input.
"""
import itertools
import math
from typing import Any

import fastjsonschema

VERSION_1_0 = '1.0'
VERSION = '1.1'
SUPPORTED_VERSIONS = (VERSION_1_0, VERSION)
FACTS = 'facts'
METRICS = 'metrics'

HEALTH_STATES = ('healthy', 'degraded', 'unhealthy')
#: health state -> rank (filters compare ranks)
HEALTH_RANK = {state: rank for rank, state in enumerate(HEALTH_STATES)}
AGENT_MODES = ('annotate', 'inventory')
#: the named power profiles (``[power] profiles``, ``gpu:power_profile``);
#: a GPU's ``power_profile`` is one of them or an explicit limit
POWER_PROFILES = ('max-performance', 'balanced', 'efficiency')
POWER_PROFILE_PATTERN = (r'^(max-performance|balanced|efficiency|'
                         r'\d+(\.\d+)?W|\d+(\.\d+)?%)$')

MAX_STRING = 255
MAX_LIST = 256
MAX_REASONS = 64
MAX_METRICS = 128
#: bound of any number whose field has no tighter one
MAX_NUMBER = 1e15
#: seconds since the epoch (year 5138)
MAX_TIME = 1e11
MAX_SEQ = 2 ** 63 - 1
#: a project id (Keystone's are 32 hex digits; naming allows 64)
MAX_PROJECT_ID = 64

#: metric name -> (min, max): what schedulers use, sent in every metrics
#: message.  The full metric set goes to Prometheus, not here.
METRIC_RANGES = {
    'utilization_pct': (0.0, 100.0),
    'memory_used_mib': (0.0, MAX_NUMBER),
    'temperature_c': (-100.0, 300.0),
    'slowdown_temperature_c': (-100.0, 300.0),
    'power_w': (0.0, 1e6),
    'power_limit_w': (0.0, 1e6),
}
SCHEDULER_METRICS = tuple(METRIC_RANGES)
#: a 1.0 payload's other metrics: any name, a bounded number or null
_OTHER_METRIC = (-MAX_NUMBER, MAX_NUMBER)
#: the GPU keys that are not facts
DYNAMIC_KEYS = ('health', 'assigned', 'metrics')
_DYNAMIC = frozenset(DYNAMIC_KEYS)


def _string(nullable=True, min_length=0, pattern=None) -> dict:
    schema = {'type': ['string', 'null'] if nullable else 'string',
              'maxLength': MAX_STRING, 'minLength': min_length}
    if pattern:
        schema['pattern'] = pattern
    return schema


def _number(lo, hi, integer=False, nullable=True) -> dict:
    kind = 'integer' if integer else 'number'
    return {'type': [kind, 'null'] if nullable else kind,
            'minimum': lo, 'maximum': hi}


def _names(limit=MAX_LIST, nullable=False) -> dict:
    return {'type': ['array', 'null'] if nullable else 'array',
            'maxItems': limit,
            'items': _string(nullable=False, min_length=1)}


_BOOL = {'type': ['boolean', 'null']}
# a later 1.x agent may add keys: scalars only, so that sizes stay
# bounded, and no floats (a float field is declared, see problem())
_EXTRA = {'type': ['string', 'integer', 'boolean', 'null'],
          'maxLength': MAX_STRING, 'minimum': -MAX_NUMBER,
          'maximum': MAX_NUMBER}

GPU_FACTS = {
    'type': 'object',
    'required': ['pci_address', 'provider_uuids'],
    'properties': {
        'pci_address': _string(nullable=False, min_length=1),
        'provider_uuids': _names(),
        'vfs': _names(nullable=True),
        'vendor': _string(),
        'model': _string(),
        'uuid': _string(),
        'mode': _string(),
        'offered_vgpu_type': _string(),
        'memory_mib': _number(0, MAX_NUMBER, integer=True),
        'numa_node': _number(-1, 4096, integer=True),
        'driver_version': _string(pattern=r'^(\d+(\.\d+)*)?$'),
        'cuda_cc': _string(pattern=r'^(\d+\.\d+)?$'),
        # optional (agents before it leave it out): the [power] profile
        'power_profile': _string(pattern=POWER_PROFILE_PATTERN),
        'vgpu_types': {'type': ['array', 'null'], 'maxItems': MAX_LIST,
                       'items': {
                           'type': 'object', 'required': ['id'],
                           'properties': {
                               'id': _string(nullable=False, min_length=1),
                               'name': _string(),
                               'framebuffer_mib': _number(
                                   0, MAX_NUMBER, integer=True),
                               'available': _number(0, MAX_NUMBER,
                                                    integer=True),
                               'max': _number(0, MAX_NUMBER, integer=True)},
                           'additionalProperties': _EXTRA}},
        'mig': {'type': ['object', 'null'],
                'properties': {'capable': _BOOL, 'enabled': _BOOL},
                'additionalProperties': _EXTRA},
        # the project the GPU is reserved for
        # (openstack gpu reservation create);
        # absent or null: not reserved
        'reserved_for': {'type': ['string', 'null'], 'minLength': 1,
                         'maxLength': MAX_PROJECT_ID,
                         'pattern': r'^[^\s]+$'},
    },
    'additionalProperties': _EXTRA,
}

HEALTH = {'type': 'object', 'required': ['state'],
          'properties': {'state': {'enum': list(HEALTH_STATES)},
                         'reasons': _names(MAX_REASONS, nullable=True)},
          'additionalProperties': False}


def _metrics(others: bool) -> dict:
    schema = {'type': ['object', 'null'], 'maxProperties': MAX_METRICS,
              'properties': {name: _number(lo, hi)
                             for name, (lo, hi) in METRIC_RANGES.items()},
              'propertyNames': {'maxLength': MAX_STRING}}
    schema['additionalProperties'] = (_number(*_OTHER_METRIC) if others
                                      else False)
    return schema


def _top(version: str, kind: str | None, gpu: dict, **extra) -> dict:
    properties = {
        'version': {'const': version},
        'host': _string(nullable=False, min_length=1),
        'generated_at': _number(0, MAX_TIME, nullable=False),
        'gpus': {'type': 'array', 'items': gpu},
    }
    required = ['version', 'host', 'generated_at', 'gpus']
    if kind is not None:
        properties.update(kind={'const': kind},
                          seq=_number(0, MAX_SEQ, integer=True,
                                      nullable=False),
                          digest=_string(nullable=False, min_length=8,
                                         pattern=r'^[0-9a-f]+$'))
        required += ['kind', 'seq', 'digest']
    properties.update(extra)
    return {'type': 'object', 'required': required,
            'properties': properties, 'additionalProperties': _EXTRA}


_IDENTITY = {'nodename': _string(), 'root_provider_uuid': _string(),
             'agent_mode': {'enum': list(AGENT_MODES) + [None]}}

#: protocol 1.0: one payload with everything
_GPU_1_0 = {
    **GPU_FACTS,
    'required': GPU_FACTS['required'] + ['health'],
    'properties': {**GPU_FACTS['properties'], 'health': HEALTH,
                   'assigned': _BOOL, 'metrics': _metrics(True)}}
PAYLOAD_1_0 = _top(VERSION_1_0, None, _GPU_1_0, **_IDENTITY)
#: protocol 1.1 facts message
FACTS_1_1 = _top(VERSION, FACTS, GPU_FACTS, **_IDENTITY)
#: protocol 1.1 metrics message: per GPU, in the facts' order
METRICS_1_1 = _top(VERSION, METRICS, {
    'type': 'object', 'required': ['health'],
    'properties': {'health': HEALTH, 'assigned': _BOOL,
                   'metrics': _metrics(False)},
    'additionalProperties': False})

_VALIDATORS = {(VERSION_1_0, None): fastjsonschema.compile(PAYLOAD_1_0),
               # its GPUs apart: see problem()
               (VERSION, FACTS): fastjsonschema.compile(_top(
                   VERSION, FACTS, {'type': 'object'}, **_IDENTITY)),
               (VERSION, METRICS): fastjsonschema.compile(METRICS_1_1)}
_GPU_FACTS = fastjsonschema.compile(GPU_FACTS)


def host_of(message: Any) -> str:
    """The host a message names, for log lines (never raises)."""
    if isinstance(message, dict):
        host = message.get('host')
        if isinstance(host, str) and host:
            return host[:MAX_STRING]
    return '<unknown host>'


def kind_of(message: Any) -> tuple[str, str | None] | None:
    """(version, kind) of a message this scheduler reads, else None."""
    if message.__class__ is not dict:
        return None
    version = message.get('version')
    if version == VERSION:
        kind = message.get('kind')
        if kind == FACTS or kind == METRICS:
            return version, kind
        return None
    if version == VERSION_1_0:
        return version, None
    return None


def problem(message: Any, max_gpus: int, held: list | tuple = ()
            ) -> str | None:
    """Why ``message`` is not a valid state message; None when it is.

    :param max_gpus: ``[gpu_scheduler] max_gpus_per_host``.
    :param held: for a facts message, the validated GPU objects of the
        host's held facts, by position: a GPU equal to its held one is
        not validated again (facts are validated once when they change,
        GPU by GPU).
    """
    key = kind_of(message)
    if key is None:
        if not isinstance(message, dict):
            return 'a state message must be an object, got %s' % (
                type(message).__name__)
        return ('schema version %r, kind %r is not supported (this '
                'scheduler reads %s: upgrade the scheduler plugins)'
                % (message.get('version'), message.get('kind'),
                   ', '.join(SUPPORTED_VERSIONS)))
    try:
        _VALIDATORS[key](message)
    except fastjsonschema.JsonSchemaValueException as exc:
        return str(exc)[:300]
    if key[1] == FACTS:
        for i, gpu in enumerate(message['gpus']):
            if i < len(held) and gpu == held[i]:
                continue
            try:
                _GPU_FACTS(gpu)
            except fastjsonschema.JsonSchemaValueException as exc:
                return ('data.gpus[%d]%s' % (i, str(exc)[4:]))[:300]
    # JSON has no NaN (a Python decoder accepts it) and NaN compares false
    # with any bound: the float fields, generated_at and metrics, are
    # checked here
    if message['generated_at'] != message['generated_at']:
        return 'data.generated_at must be a number, got NaN'
    if key[1] != FACTS:
        for i, gpu in enumerate(message['gpus']):
            for name, value in (gpu.get('metrics') or {}).items():
                if value != value:
                    return ('data.gpus[%d].metrics.%s must be a number, '
                            'got NaN' % (i, name))
    gpus = message['gpus']
    if len(gpus) > max_gpus:
        return ('%d GPUs, more than [gpu_scheduler] max_gpus_per_host (%d)'
                % (len(gpus), max_gpus))
    if key[1] != METRICS:
        seen = set()
        for i, gpu in enumerate(gpus):
            if gpu['pci_address'] in seen:
                return 'gpus.%d.pci_address %s is listed twice' % (
                    i, gpu['pci_address'])
            seen.add(gpu['pci_address'])
    return None


_HEALTH_KEYS = frozenset(('state', 'reasons'))
_NUMBERS = frozenset((int, float, type(None)))
#: metric names seen valid (a fleet has a few dozen), bounded
_known_names = set(METRIC_RANGES)
_KNOWN_NAMES_LIMIT = 4096


def _health_ok(health: Any) -> bool:
    if health.__class__ is not dict or health.get('state') not in HEALTH_RANK:
        return False
    reasons = health.get('reasons')
    if reasons is not None:
        if reasons.__class__ is not list or len(reasons) > MAX_REASONS:
            return False
        for reason in reasons:
            if reason.__class__ is not str or not 0 < len(reason) \
                    <= MAX_STRING:
                return False
    return health.keys() <= _HEALTH_KEYS


def _metrics_ok(dicts: list) -> bool:
    """The metrics of a 1.0 payload's GPUs: bounded numbers or nulls.

    About 30 metrics per GPU, any names: the loops over them run in C,
    over every GPU at once: the names, the values' types, their extremes
    against the widest bound, their sum (NaN and infinities propagate
    into it); then the bounds of the known metrics one by one.
    """
    for values in dicts:
        if values.__class__ is not dict or len(values) > MAX_METRICS:
            return False
    names = set().union(*dicts)
    if not names <= _known_names:
        for name in names - _known_names:
            if name.__class__ is not str or len(name) > MAX_STRING:
                return False
        if len(_known_names) < _KNOWN_NAMES_LIMIT:
            _known_names.update(names)
    numbers = list(itertools.chain.from_iterable(
        values.values() for values in dicts))
    types = set(map(type, numbers))
    if not types <= _NUMBERS:
        return False
    if type(None) in types:
        numbers = [v for v in numbers if v is not None]
    if numbers:
        # extremes first: a sum could overflow (10**400)
        if min(numbers) < _OTHER_METRIC[0] or max(
                numbers) > _OTHER_METRIC[1]:
            return False
        total = sum(numbers)
        if total != total or total in (math.inf, -math.inf):
            return False
    for values in dicts:
        get = values.get
        for name, (lo, hi) in METRIC_RANGES.items():
            value = get(name)
            if value is not None and not lo <= value <= hi:
                return False
    return True


def dynamic_ok(gpus: list, others: bool) -> bool:
    """True when each GPU's health, assigned and metrics are valid.

    The bounded loop of every metrics message (``others``: a 1.0 payload,
    whose metrics may have other names); what it refuses,
    :func:`problem` words.  Unknown keys in a GPU entry are refused.
    """
    ranges = METRIC_RANGES
    # a 1.0 payload's metrics, checked at once
    batch = []
    for gpu in gpus:
        if gpu.__class__ is not dict or (not others
                                         and not gpu.keys() <= _DYNAMIC):
            return False
        assigned = gpu.get('assigned')
        if assigned is not None and assigned is not True \
                and assigned is not False:
            return False
        if not _health_ok(gpu.get('health')):
            return False
        values = gpu.get('metrics')
        if values is None:
            continue
        if others:
            batch.append(values)
            continue
        # a 1.1 metrics message: the few known metrics, inline
        if values.__class__ is not dict:
            return False
        for name, value in values.items():
            bounds = ranges.get(name)
            if bounds is None:
                return False
            cls = value.__class__
            if cls is float or cls is int:
                if not bounds[0] <= value <= bounds[1]:     # NaN too
                    return False
            elif value is not None:
                return False
    return not batch or _metrics_ok(batch)


def metrics_problem(message: dict, max_gpus: int) -> str | None:
    """:func:`problem` of a 1.1 metrics message, quickly when valid."""
    gpus = message.get('gpus')
    at = message.get('generated_at')
    seq = message.get('seq')
    digest = message.get('digest')
    if (gpus.__class__ is list and len(gpus) <= max_gpus
            and (at.__class__ is float or at.__class__ is int)
            and 0 <= at <= MAX_TIME
            and seq.__class__ is int and 0 <= seq <= MAX_SEQ
            and digest.__class__ is str and 8 <= len(digest) <= MAX_STRING
            and message['host'].__class__ is str
            and 0 < len(message['host']) <= MAX_STRING
            and len(message) == 7
            and dynamic_ok(gpus, others=False)):
        return None
    # unsure (or invalid): the schema decides and words the reason
    return problem(message, max_gpus)


def facts_of(gpu: dict) -> dict:
    """A 1.0 GPU object without what is not a fact."""
    return {k: v for k, v in gpu.items() if k not in DYNAMIC_KEYS}
