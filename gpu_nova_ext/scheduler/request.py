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

"""The ``gpu:`` extra specs of a request, parsed once into a GpuRequest.

One parser serves the filters, the weighers and nova-api's validators
(:mod:`gpu_nova_ext.api.extra_specs` calls the ``parse_*`` functions), so
a value the API accepts is a value the scheduler understands.

A request is a *GPU request* (design doc: Flavor extra specs) when it asks
for VGPU, PGPU, VGPU_DISPLAY_HEAD, ``CUSTOM_GPU_*`` or ``CUSTOM_VGPU_*``
resources (or a PCI-
in-Placement class of an NVIDIA/AMD device) in any request group, for a
PCI alias whose spec is a GPU, or has any ``gpu:`` key. A request that
asks for other custom resources or for a PCI alias of an ambiguous vendor
(Intel) is a *maybe* request: it is a GPU request on the hosts whose
allocation candidates draw from a provider the state cache knows as a GPU
(custom mdev classes exist only in compute nodes' configuration).
Everything else is a non-GPU request, which the GPU filters pass
untouched.
"""
from collections.abc import Mapping
import dataclasses
import re
import threading
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext import naming
from gpu_nova_ext.state import schema

LOG = logging.getLogger(__name__)

PREFIX = 'gpu:'

NONE = 0   # not a GPU request
MAYBE = 1  # GPU request where candidates draw from a known GPU provider
GPU = 2    # GPU request

HEALTH_POLICIES = ('healthy', 'degraded_ok', 'any')
# highest accepted health rank (see state.cache.HEALTH_RANK) per policy
HEALTH_MAX_RANK = {'healthy': 0, 'degraded_ok': 1, 'any': 2}
MODES = ('vgpu', 'passthrough')
POLICIES = ('pack', 'spread', 'coolest', 'least_loaded', 'fragmentation')

GPU_RESOURCE_CLASSES = frozenset(['VGPU', 'PGPU', 'VGPU_DISPLAY_HEAD'])
# CUSTOM_VGPU_<MODEL>: the per-model mdev_class nova-conf writes
GPU_RC_PREFIXES = ('CUSTOM_GPU_', 'CUSTOM_VGPU_', 'CUSTOM_PCI_10DE_',
                   'CUSTOM_PCI_1002_')
# PCI vendors that make GPUs and little else a flavor would ask for
GPU_VENDOR_IDS = frozenset(['10de', '1002'])
# vendors that make GPUs among other devices: decided by the candidates
MAYBE_VENDOR_IDS = frozenset(['8086'])

_MEMORY_RE = re.compile(r'^\s*(\d+)\s*(MB|MiB|GB|GiB)?\s*$', re.IGNORECASE)
_CC_RE = re.compile(r'^\s*(\d+)\.(\d+)\s*$')
_VERSION_RE = re.compile(r'^\s*(\d+(?:\.\d+){0,3})\s*$')
_MODEL_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9 _.\-]*$')
_VGPU_TYPE_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9_.\-]*$')
_RESOURCES_RE = re.compile(r'^resources[a-zA-Z0-9_-]*:(.+)$')

MEMORY_UNITS = {'mb': 1, 'mib': 1, 'gb': 1024, 'gib': 1024}


# -- value parsers (shared with nova-api's validators) ------------------
# Each takes the extra spec's string and returns the parsed value or
# raises ValueError whose message says what is allowed.

def parse_models(value: str) -> tuple[str, ...]:
    """``"A100, H100_SXM"`` -> normalized models."""
    models = []
    for item in value.split(','):
        item = item.strip()
        if not item or not _MODEL_RE.match(item):
            raise ValueError('a comma-separated list of GPU models such as '
                             'A100 or A100_80GB_PCIE')
        norm = naming.normalize_model(item)
        if not norm:
            raise ValueError('a comma-separated list of GPU models such as '
                             'A100 or A100_80GB_PCIE')
        models.append(norm)
    return tuple(models)


def _choice(value: str, choices: tuple[str, ...]) -> str:
    """One of ``choices``, exactly.

    As the API's enum: no case folding, no blanks.
    """
    if value not in choices:
        raise ValueError('one of %s' % ', '.join(choices))
    return value


def parse_vendor(value: str) -> str:
    return _choice(value, naming.VENDORS)


def parse_mode(value: str) -> str:
    return _choice(value, MODES)


def parse_vgpu_types(value: str) -> frozenset:
    types = []
    for item in value.split(','):
        item = item.strip()
        if not item or not _VGPU_TYPE_RE.match(item):
            raise ValueError('a comma-separated list of mdev type ids or '
                             'names such as nvidia-471 or A100D-10C')
        types.append(item)
    return frozenset(types)


def parse_memory(value: str) -> int:
    """``"16GB"`` -> 16384 (MiB); plain numbers are MiB."""
    m = _MEMORY_RE.match(value)
    if not m:
        raise ValueError('an integer number of MiB, or with a unit MB, MiB, '
                         'GB or GiB (e.g. 16384 or 16GB)')
    amount = int(m.group(1))
    unit = (m.group(2) or 'mib').lower()
    return amount * MEMORY_UNITS[unit]


def parse_cuda_cc(value: str) -> tuple[int, int]:
    m = _CC_RE.match(value)
    if not m:
        raise ValueError('a CUDA compute capability X.Y such as 8.0')
    return int(m.group(1)), int(m.group(2))


def parse_driver(value: str) -> tuple[int, ...]:
    m = _VERSION_RE.match(value)
    if not m:
        raise ValueError('a dotted driver version such as 550.54.15')
    return tuple(int(p) for p in m.group(1).split('.'))


def parse_health(value: str) -> str:
    return _choice(value, HEALTH_POLICIES)


def parse_policy(value: str) -> str:
    return _choice(value, POLICIES)


def parse_power_profile(value: str) -> str:
    """A power profile as the agents report it (``[power] profiles``)."""
    if not re.match(schema.POWER_PROFILE_PATTERN, value):
        raise ValueError('one of %s, or a limit such as 250W or 80%%'
                         % ', '.join(schema.POWER_PROFILES))
    return value


# key -> (GpuRequest field, parser, filter that enforces it)
KEYS = {
    'gpu:model': ('models', parse_models, 'GpuModelFilter'),
    'gpu:vendor': ('vendor', parse_vendor, 'GpuModelFilter'),
    'gpu:mode': ('mode', parse_mode, 'GpuModelFilter'),
    'gpu:vgpu_type': ('vgpu_types', parse_vgpu_types, 'GpuModelFilter'),
    'gpu:memory_min': ('memory_min_mib', parse_memory, 'GpuMemoryFilter'),
    'gpu:cuda_cc_min': ('cuda_cc_min', parse_cuda_cc, 'GpuCapabilityFilter'),
    'gpu:driver_min': ('driver_min', parse_driver, 'GpuCapabilityFilter'),
    'gpu:health': ('health', parse_health, 'GpuHealthFilter'),
    'gpu:intra_host_policy': ('intra_host_policy', parse_policy,
                              'GpuCandidateOrderFilter'),
    'gpu:power_profile': ('power_profile', parse_power_profile,
                          'GpuPowerProfileFilter'),
}
# unknown gpu: keys are the model filter's to reject
UNKNOWN_KEY_FILTER = 'GpuModelFilter'
# keys whose value constrains the GPU (missing_state_policy
# fail_constrained); gpu:health counts unless it is "any"
CONSTRAINT_FIELDS = ('models', 'vendor', 'mode', 'vgpu_types',
                     'memory_min_mib', 'cuda_cc_min', 'driver_min',
                     'power_profile')


def misspelt(key: str) -> str | None:
    """The right spelling of a key in a misspelt ``gpu:`` namespace.

    ``GPU:model``, ``Gpu:Model`` and `` gpu:model`` -> ``gpu:model``;
    None for a key that is right or not ours.
    """
    if key.startswith(PREFIX) or ':' not in key:
        return None
    namespace, name = key.split(':', 1)
    if namespace.strip().lower() != 'gpu':
        return None
    return PREFIX + name.strip().lower()


@dataclasses.dataclass(frozen=True, slots=True)
class SpecError:
    key: str
    value: Any
    reason: str
    filter_name: str


@dataclasses.dataclass(frozen=True, slots=True)
class GpuRequest:
    """What a request asks of GPUs."""

    kind: int = NONE                      # NONE, MAYBE or GPU
    models: tuple[str, ...] = ()
    vendor: str | None = None
    mode: str | None = None
    vgpu_types: frozenset | None = None
    memory_min_mib: int | None = None
    cuda_cc_min: tuple[int, ...] | None = None
    driver_min: tuple[int, ...] | None = None
    health: str = 'healthy'
    intra_host_policy: str | None = None
    power_profile: str | None = None
    errors: tuple[SpecError, ...] = ()
    # asks something of the GPU itself (see CONSTRAINT_FIELDS)
    constrained: bool = False

    @property
    def is_gpu(self) -> bool:
        return self.kind == GPU

    def errors_for(self, filter_name: str) -> tuple[SpecError, ...]:
        return tuple(e for e in self.errors if e.filter_name == filter_name)


NON_GPU = GpuRequest()


def _classify_rc(rc: str) -> int:
    if rc in GPU_RESOURCE_CLASSES or rc.startswith(GPU_RC_PREFIXES):
        return GPU
    if rc.startswith('CUSTOM_'):
        return MAYBE
    return NONE


def _classify_pci_spec(spec: Mapping[str, Any]) -> int:
    rc = (spec.get('resource_class') or '').upper()
    if rc:
        kind = _classify_rc(rc)
        if kind:
            return kind
    vendor = (spec.get('vendor_id') or '').lower()
    if vendor in GPU_VENDOR_IDS:
        return GPU
    if vendor in MAYBE_VENDOR_IDS:
        return MAYBE
    return NONE


def parse_extra_specs(extra_specs: Mapping[str, str],
                      pci_specs: list[Mapping[str, Any]] = (),
                      resource_classes: list[str] = ()) -> GpuRequest:
    """Pure parser: flavor extra specs (+ PCI and port requests) -> request.

    :param extra_specs: the flavor's extra specs.
    :param pci_specs: specs of the request's PCI requests (each a dict with
        ``vendor_id``, ``product_id``, ``resource_class``...).
    :param resource_classes: resource classes of request groups that do not
        come from the flavor (ports, accelerators).
    """
    kind = NONE
    fields: dict[str, Any] = {}
    errors = []
    for key, value in extra_specs.items():
        if key.startswith(PREFIX):
            kind = GPU
            known = KEYS.get(key)
            if known is None:
                errors.append(SpecError(
                    key, value, 'unknown gpu: extra spec; known keys: %s'
                    % ', '.join(sorted(KEYS)), UNKNOWN_KEY_FILTER))
                continue
            field, parser, filter_name = known
            try:
                fields[field] = parser(str(value))
            except ValueError as exc:
                errors.append(SpecError(key, value, 'expected %s' % exc,
                                        filter_name))
            continue
        right = misspelt(key)
        if right is not None:
            kind = GPU
            errors.append(SpecError(
                key, value, 'misspelt gpu: namespace, write %s' % right,
                UNKNOWN_KEY_FILTER))
            continue
        if kind == GPU:
            continue
        m = _RESOURCES_RE.match(key)
        if m:
            try:
                if int(value) <= 0:
                    continue
            except (TypeError, ValueError):
                continue
            kind = max(kind, _classify_rc(m.group(1).strip().upper()))
    if kind != GPU:
        for rc in resource_classes:
            kind = max(kind, _classify_rc(rc))
        for spec in pci_specs:
            kind = max(kind, _classify_pci_spec(spec))
    if kind == NONE:
        return NON_GPU
    constrained = (any(f in fields for f in CONSTRAINT_FIELDS)
                   or fields.get('health', 'any') != 'any')
    return GpuRequest(kind=kind, errors=tuple(errors),
                      constrained=constrained, **fields)


# -- RequestSpec -> GpuRequest ------------------------------------------

_alias_lock = threading.Lock()
_alias_memo: dict[tuple, dict] = {}


def _alias_specs(alias_value: str) -> list[dict]:
    """Specs of ``pci_passthrough:alias`` from nova.conf ``[pci] alias``."""
    import nova.conf
    from nova.pci import request as pci_request

    conf_aliases = tuple(nova.conf.CONF.pci.alias)
    aliases = _alias_memo.get(conf_aliases)
    if aliases is None:
        # Nova memoizes the parsed aliases for the life of the process,
        # whatever the option says later (a reload, another test): parse
        # the value we are looking at (once per distinct value).
        cache_clear = getattr(pci_request.get_alias_from_config,
                              'cache_clear', None)
        if cache_clear is not None:
            cache_clear()
        try:
            aliases = pci_request.get_alias_from_config()
        except Exception as exc:
            LOG.warning('Cannot read nova.conf [pci] alias (%s): PCI alias '
                        'requests count as possible GPU requests.', exc)
            aliases = {}
        with _alias_lock:
            _alias_memo.clear()
            _alias_memo[conf_aliases] = aliases
    specs = []
    for item in alias_value.split(','):
        name = item.split(':', 1)[0].strip()
        entry = aliases.get(name)
        if entry is None:
            specs.append({'resource_class': 'CUSTOM_UNKNOWN_ALIAS'})
            continue
        specs.extend(entry[1])
    return specs


def _pci_specs(spec_obj: Any, extra_specs: Mapping[str, str]) -> list:
    if spec_obj.obj_attr_is_set('pci_requests') and spec_obj.pci_requests:
        specs = []
        for req in spec_obj.pci_requests.requests or []:
            specs.extend(req.spec or [])
        return specs
    alias = extra_specs.get('pci_passthrough:alias')
    if alias:
        return _alias_specs(alias)
    return []


def _other_resource_classes(spec_obj: Any) -> list[str]:
    if not spec_obj.obj_attr_is_set('requested_resources'):
        return []
    rcs = []
    for group in spec_obj.requested_resources or []:
        if group.obj_attr_is_set('resources'):
            rcs.extend(group.resources)
    return rcs


def from_request_spec(spec_obj: Any) -> GpuRequest:
    """Parse a nova RequestSpec (no memo; see ``scheduler.context``)."""
    flavor = spec_obj.flavor if spec_obj.obj_attr_is_set('flavor') else None
    extra_specs = (flavor.extra_specs or {}) if flavor is not None else {}
    return parse_extra_specs(extra_specs, _pci_specs(spec_obj, extra_specs),
                             _other_resource_classes(spec_obj))
