"""Schema of the GPU state payload (DESIGN section 5), version "1.0".

:func:`validate` checks what an agent cast before the scheduler's cache
ingests it: schema version, required fields, types, value ranges and
sizes.  It raises :class:`gpu_nova_ext.exception.InvalidStatePayload`
naming the host and the first problem found.  Fields that need NVML (model,
memory, driver, metrics...) may be null; unknown extra fields are allowed
so that a later 1.x agent can add some.
"""
import json
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
