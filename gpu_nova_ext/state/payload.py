"""Schema of the GPU state payload (design doc: State protocol), version "1.0".

:func:`validate` checks what an agent cast before the scheduler's cache
ingests it: schema version, required fields, types, value ranges and
sizes.  It raises :class:`gpu_nova_ext.exception.InvalidStatePayload`
naming the host and the first problem found.  Fields that need NVML (model,
memory, driver, metrics...) may be null; unknown extra fields are allowed
so that a later 1.x agent can add some.

The scheduler's cache ingests every host's payload every few seconds and
most of a payload does not change between two of them: :func:`static_part`
gives a type-exact key of everything but the GPUs' metrics, and
:func:`quick_valid` checks only what remains (the top-level fields, the
metrics and the size) of a payload whose static part the cache found
valid before.  Whatever the quick check is unsure of goes to
:func:`validate`, which alone words the errors.
"""
import json
import marshal
import math
from typing import Any

from gpu_nova_ext import exception

VERSION = '1.0'
SUPPORTED_VERSIONS = frozenset([VERSION])

HEALTH_STATES = ('healthy', 'degraded', 'unhealthy')
AGENT_MODES = ('annotate', 'inventory')

MAX_STRING = 255
MAX_REASONS = 64
MAX_VGPU_TYPES = 256
MAX_PROVIDERS = 256
MAX_VFS = 256

# metric name -> (min, max); None where unbounded.  Unknown metrics are
# accepted when numeric or null.
METRIC_RANGES = {
    'utilization_pct': (0.0, 100.0),
    'memory_utilization_pct': (0.0, 100.0),
    'memory_used_mib': (0.0, None),
    'temperature_c': (-100.0, 300.0),
    'slowdown_temperature_c': (-100.0, 300.0),
    'shutdown_temperature_c': (-100.0, 300.0),
    'power_w': (0.0, None),
    'power_limit_w': (0.0, None),
}


# Upper bounds of JSON sizes (compact separators, ensure_ascii): a float's
# repr is at most 24 characters; quick_valid() takes ints only within
# +-_QUICK_NUM (at most 17 characters) and leaves bigger ones to validate().
_NUM_SIZE = 24
_QUICK_NUM = 1e15
_FLOAT_MAX = 1.7976931348623157e308
TOP_KEYS = frozenset(['version', 'host', 'nodename', 'generated_at',
                      'agent_mode', 'root_provider_uuid', 'gpus'])
# '{', '}' and per key '"key":' plus a comma; the scalar values: the
# version, agent mode and generated_at
_TOP_SIZE = (1 + sum(len(k) + 4 for k in TOP_KEYS)
             + len(VERSION) + 2 + max(len(m) for m in AGENT_MODES) + 2
             + _NUM_SIZE)
# ',"metrics":' inserted into a GPU object
_METRICS_ENTRY = len(',"metrics":')
# metric name -> (lowest, highest, size of '"name":<number>,'), the range
# clipped to +-_QUICK_NUM
_QUICK_METRICS = {
    name: (-_QUICK_NUM if lo is None else lo,
           _QUICK_NUM if hi is None else hi,
           len(name) + 4 + _NUM_SIZE)
    for name, (lo, hi) in METRIC_RANGES.items()}
# a GPU object without metrics: static_part()
ABSENT = object()


class _Invalid(Exception):
    pass


def _num(value: Any, where: str, lo: float | None = None,
         hi: float | None = None, integer: bool = False,
         nullable: bool = True) -> None:
    if value is None:
        if nullable:
            return
        raise _Invalid('%s is missing' % where)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Invalid('%s must be a number, got %r' % (where, value))
    if integer and not isinstance(value, int):
        raise _Invalid('%s must be an integer, got %r' % (where, value))
    if isinstance(value, float) and not math.isfinite(value):
        raise _Invalid('%s must be finite, got %r' % (where, value))
    if lo is not None and value < lo:
        raise _Invalid('%s must be >= %s, got %r' % (where, lo, value))
    if hi is not None and value > hi:
        raise _Invalid('%s must be <= %s, got %r' % (where, hi, value))


def _str(value: Any, where: str, nullable: bool = True,
         choices: tuple | None = None) -> None:
    if value is None:
        if nullable:
            return
        raise _Invalid('%s is missing' % where)
    if not isinstance(value, str):
        raise _Invalid('%s must be a string, got %r' % (where, value))
    if not nullable and not value:
        raise _Invalid('%s must not be empty' % where)
    if len(value) > MAX_STRING:
        raise _Invalid('%s is longer than %d characters'
                       % (where, MAX_STRING))
    if choices is not None and value not in choices:
        raise _Invalid('%s must be one of %s, got %r'
                       % (where, ', '.join(choices), value))


def _str_list(value: Any, where: str, limit: int) -> None:
    if not isinstance(value, list):
        raise _Invalid('%s must be a list, got %r' % (where, value))
    if len(value) > limit:
        raise _Invalid('%s has more than %d entries' % (where, limit))
    for i, item in enumerate(value):
        _str(item, '%s[%d]' % (where, i), nullable=False)


def _dict(value: Any, where: str, nullable: bool = True) -> bool:
    if value is None:
        if nullable:
            return False
        raise _Invalid('%s is missing' % where)
    if not isinstance(value, dict):
        raise _Invalid('%s must be an object, got %r' % (where, value))
    return True


def _version_tuple(value: str, where: str) -> None:
    parts = value.split('.')
    if not all(p.isdigit() for p in parts):
        raise _Invalid('%s must be a dotted version like 550.54.15, got %r'
                       % (where, value))


def _check_gpu(gpu: Any, where: str) -> None:
    _dict(gpu, where, nullable=False)
    _str(gpu.get('pci_address'), where + '.pci_address', nullable=False)
    if 'provider_uuids' not in gpu:
        raise _Invalid('%s.provider_uuids is missing' % where)
    _str_list(gpu['provider_uuids'], where + '.provider_uuids',
              MAX_PROVIDERS)
    if gpu.get('vfs') is not None:
        _str_list(gpu['vfs'], where + '.vfs', MAX_VFS)
    for key in ('vendor', 'model', 'uuid', 'mode', 'offered_vgpu_type'):
        _str(gpu.get(key), '%s.%s' % (where, key))
    _num(gpu.get('memory_mib'), where + '.memory_mib', lo=0, integer=True)
    _num(gpu.get('numa_node'), where + '.numa_node', lo=-1, integer=True)
    driver = gpu.get('driver_version')
    _str(driver, where + '.driver_version')
    if driver:
        _version_tuple(driver, where + '.driver_version')
    cuda_cc = gpu.get('cuda_cc')
    _str(cuda_cc, where + '.cuda_cc')
    if cuda_cc and (cuda_cc.count('.') != 1
                    or not cuda_cc.replace('.', '').isdigit()):
        raise _Invalid('%s.cuda_cc must look like 8.0, got %r'
                       % (where, cuda_cc))
    types = gpu.get('vgpu_types')
    if types is not None:
        if not isinstance(types, list):
            raise _Invalid('%s.vgpu_types must be a list' % where)
        if len(types) > MAX_VGPU_TYPES:
            raise _Invalid('%s.vgpu_types has more than %d entries'
                           % (where, MAX_VGPU_TYPES))
        for i, vtype in enumerate(types):
            w = '%s.vgpu_types[%d]' % (where, i)
            _dict(vtype, w, nullable=False)
            _str(vtype.get('id'), w + '.id', nullable=False)
            _str(vtype.get('name'), w + '.name')
            for key in ('framebuffer_mib', 'available', 'max'):
                _num(vtype.get(key), '%s.%s' % (w, key), lo=0, integer=True)
    if _dict(gpu.get('mig'), where + '.mig'):
        for key in ('capable', 'enabled'):
            value = gpu['mig'].get(key)
            if value is not None and not isinstance(value, bool):
                raise _Invalid('%s.mig.%s must be a boolean or null, got %r'
                               % (where, key, value))
    health = gpu.get('health')
    _dict(health, where + '.health', nullable=False)
    _str(health.get('state'), where + '.health.state', nullable=False,
         choices=HEALTH_STATES)
    reasons = health.get('reasons', [])
    _str_list(reasons if reasons is not None else [],
              where + '.health.reasons', MAX_REASONS)
    metrics = gpu.get('metrics')
    if _dict(metrics, where + '.metrics'):
        for name, value in metrics.items():
            lo, hi = METRIC_RANGES.get(name, (None, None))
            _num(value, '%s.metrics.%s' % (where, name), lo=lo, hi=hi)
    assigned = gpu.get('assigned')
    if assigned is not None and not isinstance(assigned, bool):
        raise _Invalid('%s.assigned must be a boolean or null, got %r'
                       % (where, assigned))


def validate(payload: Any, max_payload_bytes: int,
             max_gpus_per_host: int) -> None:
    """Check one state payload; raise InvalidStatePayload when it is bad.

    :param payload: what the agent cast (anything: it crossed a wire).
    :param max_payload_bytes: ``[gpu_scheduler] max_payload_bytes``; the
        payload's JSON encoding must not be larger.
    :param max_gpus_per_host: ``[gpu_scheduler] max_gpus_per_host``.
    """
    check(payload, max_payload_bytes, max_gpus_per_host)


def check(payload: Any, max_payload_bytes: int,
          max_gpus_per_host: int) -> int:
    """:func:`validate`, returning :func:`static_size` (-1: unknown).

    A quick pass accepts the payloads it is sure of (plain JSON types,
    known keys, an upper bound of the JSON size within the limit); the
    rest, and every error, go through the exact checks.
    """
    size = -1
    if payload.__class__ is dict:
        gpus = payload.get('gpus')
        if gpus.__class__ is list:
            size = static_size(payload)
            if (size >= 0
                    and len({g['pci_address'] for g in gpus}) == len(gpus)
                    and quick_valid(payload,
                                    [g.get('metrics', ABSENT) for g in gpus],
                                    size, max_payload_bytes,
                                    max_gpus_per_host)):
                return size
    _validate(payload, max_payload_bytes, max_gpus_per_host)
    return size


def _validate(payload: Any, max_payload_bytes: int,
              max_gpus_per_host: int) -> None:
    """The exact checks, in the order their errors are reported."""
    host = '<unknown host>'
    if isinstance(payload, dict) and isinstance(payload.get('host'), str):
        host = payload['host'][:MAX_STRING] or host
    try:
        if not isinstance(payload, dict):
            raise _Invalid('the payload must be an object, got %s'
                           % type(payload).__name__)
        try:
            size = len(json.dumps(payload, separators=(',', ':')))
        except (TypeError, ValueError) as exc:
            raise _Invalid('not JSON-serialisable: %s' % exc)
        if size > max_payload_bytes:
            raise _Invalid('%d bytes as JSON, more than [gpu_scheduler] '
                           'max_payload_bytes (%d)'
                           % (size, max_payload_bytes))
        version = payload.get('version')
        # isinstance first: a list or dict version is unhashable.
        if not isinstance(version, str) or version not in SUPPORTED_VERSIONS:
            raise _Invalid('schema version %r is not supported (this '
                           'scheduler reads %s); upgrade the scheduler '
                           'plugins' % (version,
                                        ', '.join(sorted(SUPPORTED_VERSIONS))))
        _str(payload.get('host'), 'host', nullable=False)
        _str(payload.get('nodename'), 'nodename')
        _str(payload.get('root_provider_uuid'), 'root_provider_uuid')
        _str(payload.get('agent_mode'), 'agent_mode', choices=AGENT_MODES)
        _num(payload.get('generated_at'), 'generated_at', lo=0,
             nullable=False)
        gpus = payload.get('gpus')
        if not isinstance(gpus, list):
            raise _Invalid('gpus must be a list, got %r' % (gpus,))
        if len(gpus) > max_gpus_per_host:
            raise _Invalid('%d GPUs, more than [gpu_scheduler] '
                           'max_gpus_per_host (%d)'
                           % (len(gpus), max_gpus_per_host))
        seen = set()
        for i, gpu in enumerate(gpus):
            _check_gpu(gpu, 'gpus[%d]' % i)
            if gpu['pci_address'] in seen:
                raise _Invalid('gpus[%d].pci_address %s is listed twice'
                               % (i, gpu['pci_address']))
            seen.add(gpu['pci_address'])
    except _Invalid as exc:
        raise exception.InvalidStatePayload(host=host, reason=str(exc))


def static_part(payload: Any) -> tuple[bytes, list] | None:
    """The static key of a payload and its GPUs' metrics, or None.

    The key (a marshal) stands for the root provider UUID and the GPU
    objects without their ``metrics``, type-exactly: two payloads with the
    same key have equal values of the same types there (``1``, ``1.0`` and
    ``True`` differ; subclasses are refused), so a verdict of
    :func:`validate` on that part holds for both.  ``metrics`` has one
    entry per GPU (:data:`ABSENT` where the GPU object has none).  None
    when the payload is not a dict of plain dicts (let :func:`validate`
    judge it).

    The metrics are taken out of the GPU objects while the key is made and
    put back where they were (copies would hold references, and marshal
    marks objects referenced more than once: the key would depend on
    them; so would the loop variable, cleared before marshalling).  The
    agent puts ``metrics`` last in each GPU object, which ``dict.popitem``
    takes out and puts back at once; any other position is found and
    restored too.
    """
    if payload.__class__ is not dict:
        return None
    gpus = payload.get('gpus')
    if gpus.__class__ is not list:
        return None
    # the usual case: every GPU object a dict whose last key is metrics
    metrics = []
    append = metrics.append
    try:
        for gpu in gpus:
            if gpu.__class__ is not dict or not gpu:
                break
            name, values = gpu.popitem()
            if name != 'metrics':
                gpu[name] = values              # back where it was: last
                break
            append(values)
        else:
            gpu = None
            try:
                return (marshal.dumps((payload.get('root_provider_uuid'),
                                       gpus), 4), metrics)
            except ValueError:
                return None
    finally:
        for gpu, values in zip(gpus, metrics):
            gpu['metrics'] = values
    gpu = values = None     # no reference of ours may change the key
    return _static_part(payload, gpus)


def rebuild(key: bytes, top: dict, metrics: list | tuple) -> dict:
    """A payload equal to the one :func:`static_part` gave ``key`` for.

    :param top: the payload's fields but ``gpus``.
    :param metrics: what static_part() gave with the key.

    New objects throughout; each GPU's ``metrics`` comes last.
    """
    _root, gpus = marshal.loads(key)
    for gpu, values in zip(gpus, metrics):
        if values is not ABSENT:
            gpu['metrics'] = (values.copy() if values.__class__ is dict
                              else values)
    payload = dict(top)
    payload['gpus'] = gpus
    return payload


def _static_part(payload: dict, gpus: list) -> tuple[bytes, list] | None:
    """static_part() of GPU objects with metrics anywhere, or none."""
    metrics = []
    # GPU index -> position of metrics that were not the last key
    inside = None
    try:
        for i, gpu in enumerate(gpus):
            if gpu.__class__ is not dict:
                return None
            if not gpu:
                metrics.append(ABSENT)
                continue
            name, values = gpu.popitem()
            if name != 'metrics':
                gpu[name] = values              # back where it was: last
                if 'metrics' in gpu:
                    if inside is None:
                        inside = {}
                    inside[i] = list(gpu).index('metrics')
                    values = gpu.pop('metrics')
                else:
                    values = ABSENT
            metrics.append(values)
        gpu = None
        try:
            key = marshal.dumps((payload.get('root_provider_uuid'), gpus),
                                4)
        except ValueError:
            return None
    finally:
        # metrics[i] is GPU i's (the loop stops at a GPU object that is
        # not a dict, before its entry)
        for i, values in enumerate(metrics):
            if values is ABSENT:
                continue
            gpu = gpus[i]
            if inside is None or i not in inside:
                gpu['metrics'] = values
            else:
                items = list(gpu.items())
                items.insert(inside[i], ('metrics', values))
                gpu.clear()
                gpu.update(items)
    return key, metrics


_GPU_STRINGS = ('vendor', 'model', 'uuid', 'mode', 'offered_vgpu_type')
_GPU_KEYS = frozenset(('pci_address', 'vfs', 'provider_uuids', 'memory_mib',
                       'numa_node', 'driver_version', 'cuda_cc',
                       'vgpu_types', 'mig', 'health', 'metrics', 'assigned')
                      + _GPU_STRINGS)
_VGPU_TYPE_KEYS = frozenset(('id', 'name', 'framebuffer_mib', 'available',
                             'max'))
_MIG_KEYS = frozenset(('capable', 'enabled'))
_HEALTH_KEYS = frozenset(('state', 'reasons'))
# Per key: '"key":', a comma and room for a number, a boolean, null or
# the quotes of a string; below, a string adds 12 bytes per character,
# a list or object its own bound.
_GPU_KEYS_SIZE = sum(len(k) + 4 + _NUM_SIZE for k in _GPU_KEYS - {'metrics'})
_VGPU_TYPE_SIZE = 3 + sum(len(k) + 4 + _NUM_SIZE for k in _VGPU_TYPE_KEYS)


def _quick_str_list(value: Any, limit: int) -> int:
    """JSON size bound of a valid list of non-empty strings, or -1."""
    if value.__class__ is not list or len(value) > limit:
        return -1
    size = 2
    for item in value:
        if item.__class__ is not str or not 0 < len(item) <= MAX_STRING:
            return -1
        size += len(item) * 12 + 3
    return size


# driver and CUDA versions seen valid (a fleet has few), bounded
_good_versions: dict[str, set] = {'driver_version': set(), 'cuda_cc': set()}


def _version_ok(key: str, value: str) -> bool:
    if key == 'driver_version':
        ok = all(p.isdigit() for p in value.split('.'))
    else:
        ok = (value.count('.') == 1 and value.replace('.', '').isdigit())
    if ok:
        known = _good_versions[key]
        if len(known) >= 4096:
            known.clear()
        known.add(value)
    return ok


def _quick_gpu(gpu: Any) -> int:
    """JSON size bound of a valid GPU object without its metrics, or -1.

    -1 also where this is unsure (unknown keys, subclasses, big ints): the
    metrics are checked by quick_valid().
    """
    if gpu.__class__ is not dict or not gpu.keys() <= _GPU_KEYS:
        return -1
    get = gpu.get
    size = 2 + _GPU_KEYS_SIZE
    value = get('pci_address')
    if value.__class__ is not str or not 0 < len(value) <= MAX_STRING:
        return -1
    size += len(value) * 12
    part = _quick_str_list(get('provider_uuids'), MAX_PROVIDERS)
    if part < 0:
        return -1
    size += part
    value = get('vfs')
    if value is not None:
        part = _quick_str_list(value, MAX_VFS)
        if part < 0:
            return -1
        size += part
    for key in _GPU_STRINGS:
        value = get(key)
        if value is not None:
            if value.__class__ is not str or len(value) > MAX_STRING:
                return -1
            size += len(value) * 12
    for key, lowest in (('memory_mib', 0), ('numa_node', -1)):
        value = get(key)
        if value is not None and (value.__class__ is not int
                                  or not lowest <= value <= _QUICK_NUM):
            return -1
    for key in ('driver_version', 'cuda_cc'):
        value = get(key)
        if value is not None:
            if value.__class__ is not str or len(value) > MAX_STRING:
                return -1
            if value and value not in _good_versions[key]:
                if not _version_ok(key, value):
                    return -1
            size += len(value) * 12
    types = get('vgpu_types')
    if types is not None:
        if types.__class__ is not list or len(types) > MAX_VGPU_TYPES:
            return -1
        for vtype in types:
            if (vtype.__class__ is not dict
                    or not vtype.keys() <= _VGPU_TYPE_KEYS):
                return -1
            value = vtype.get('id')
            if value.__class__ is not str or not 0 < len(value) \
                    <= MAX_STRING:
                return -1
            size += len(value) * 12
            value = vtype.get('name')
            if value is not None:
                if value.__class__ is not str or len(value) > MAX_STRING:
                    return -1
                size += len(value) * 12
            for key in ('framebuffer_mib', 'available', 'max'):
                value = vtype.get(key)
                if value is not None and (value.__class__ is not int
                                          or not 0 <= value <= _QUICK_NUM):
                    return -1
        size += 2 + len(types) * _VGPU_TYPE_SIZE
    mig = get('mig')
    if mig is not None:
        if mig.__class__ is not dict or not mig.keys() <= _MIG_KEYS:
            return -1
        for value in mig.values():
            if value is not None and value is not True and value \
                    is not False:
                return -1
        size += 40
    health = get('health')
    if health.__class__ is not dict or not health.keys() <= _HEALTH_KEYS:
        return -1
    value = health.get('state')
    if value.__class__ is not str or value not in HEALTH_STATES:
        return -1
    value = health.get('reasons')
    if value is None:
        part = 4
    else:
        part = _quick_str_list(value, MAX_REASONS)
        if part < 0:
            return -1
    size += 40 + part
    value = get('assigned')
    if value is not None and value is not True and value is not False:
        return -1
    return size


def static_size(payload: dict) -> int:
    """JSON size bound of the GPU objects of a payload without metrics.

    -1 when unsure (then :func:`quick_valid` always is).
    """
    size = 2
    for gpu in payload['gpus']:
        part = _quick_gpu(gpu)
        if part < 0:
            return -1
        size += part + 1
    return size


def _str_size(value: str) -> int:
    # JSON escapes an ASCII character in at most 6 bytes (\u001f), any
    # other in at most 12 (a surrogate pair)
    return len(value) * (6 if value.isascii() else 12) + 2


def quick_valid(payload: dict, metrics: list, gpus_size: int,
                max_payload_bytes: int, max_gpus_per_host: int) -> bool:
    """True when ``payload`` is valid; False: unsure, ask :func:`validate`.

    Only for a payload whose :func:`static_part` (its key) passed
    :func:`validate` before: checks the rest, i.e. the top-level fields,
    the metrics, the GPU count and an upper bound of the JSON size.

    :param metrics: the third item of :func:`static_part`.
    :param gpus_size: :func:`static_size` of the static part.
    """
    if gpus_size < 0:
        return False
    if not payload.keys() <= TOP_KEYS:
        return False     # unknown top-level fields: validate() sizes them
    get = payload.get
    version = get('version')
    if version.__class__ is not str or version not in SUPPORTED_VERSIONS:
        return False
    host = get('host')
    if host.__class__ is not str or not 0 < len(host) <= MAX_STRING:
        return False
    size = _TOP_SIZE + gpus_size + _str_size(host)
    for key in ('nodename', 'root_provider_uuid'):
        value = get(key)
        if value is None:
            size += 4
        elif value.__class__ is str and len(value) <= MAX_STRING:
            size += _str_size(value)
        else:
            return False
    mode = get('agent_mode')
    if mode is not None and (mode.__class__ is not str
                             or mode not in AGENT_MODES):
        return False
    at = get('generated_at')
    cls = at.__class__
    if not ((cls is float and 0.0 <= at <= _FLOAT_MAX)
            or (cls is int and 0 <= at <= _QUICK_NUM)):
        return False
    if len(metrics) > max_gpus_per_host:
        return False
    part = _quick_metrics(metrics)
    if part < 0:
        return False
    if size + part > max_payload_bytes:
        # the bound above is coarse: try the tighter one
        part = _quick_metrics_exact(metrics)
        if part < 0:
            return False
    return size + part <= max_payload_bytes


# metric name -> (lowest, highest), for the common case
_QUICK_RANGES = {name: (lowest, highest)
                 for name, (lowest, highest, _w) in _QUICK_METRICS.items()}
# the widest '"name":<number>,' of the known metrics
_METRIC_WIDTH = max(width for _lo, _hi, width in _QUICK_METRICS.values())


def _quick_metrics(metrics: list) -> int:
    """JSON size bound of the GPUs' metrics when valid, else -1.

    The common case (known metrics, plain numbers) with one lookup per
    metric and a coarse size bound; the rest (nulls, unknown metrics)
    goes to :func:`_quick_metrics_exact`.
    """
    ranges = _QUICK_RANGES
    size = 0
    try:
        for values in metrics:
            if values.__class__ is dict:
                for name, value in values.items():
                    lowest, highest = ranges[name]
                    cls = value.__class__
                    if ((cls is not float and cls is not int)
                            or not lowest <= value <= highest):  # NaN too
                        return _quick_metrics_exact(metrics)
                size += _METRICS_ENTRY + 2 + len(values) * _METRIC_WIDTH
            elif values is None:
                size += _METRICS_ENTRY + 4
            elif values is not ABSENT:
                return -1
    except (KeyError, TypeError):
        # an unknown metric (TypeError: an unhashable name)
        return _quick_metrics_exact(metrics)
    return size


def _quick_metrics_exact(metrics: list) -> int:
    """JSON size bound of the GPUs' metrics when valid, else -1."""
    size = 0
    known = _QUICK_METRICS
    for values in metrics:
        if values.__class__ is dict:
            size += _METRICS_ENTRY + 2
            for name, value in values.items():
                bounds = known.get(name)
                if bounds is None:
                    if name.__class__ is not str:
                        return -1
                    bounds = (-_QUICK_NUM, _QUICK_NUM,
                              _str_size(name) + 2 + _NUM_SIZE)
                lowest, highest, width = bounds
                cls = value.__class__
                if cls is float or cls is int:
                    # also false for NaN
                    if not lowest <= value <= highest:
                        return -1
                elif value is not None:
                    return -1
                size += width
        elif values is None:
            size += _METRICS_ENTRY + 4
        elif values is not ABSENT:
            return -1
    return size
