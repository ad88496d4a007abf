# SPDX-License-Identifier: Apache-2.0

"""The ``gpu:`` extra specs of a request, parsed once into a GpuRequest.

:data:`KEYS` defines every ``gpu:`` key once (values and their meaning or
pattern, help, enforcing filter); nova-api's validators, the filters,
``openstack gpu flavor create`` and the docs table read it, so a value
the API accepts is one the scheduler understands.  A *GPU request* asks
for GPU resources or a GPU PCI alias, or has a ``gpu:`` key; a *maybe*
request (other custom resources, an Intel alias) is one on the hosts whose
candidates draw from a provider the state cache knows as a GPU (design
doc: Flavor extra specs).
"""
from collections.abc import Callable, Mapping
import dataclasses
import functools
import re
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext.conf import gpu_scheduler as scheduler_conf
from gpu_nova_ext import naming
from gpu_nova_ext.state import schema

LOG = logging.getLogger(__name__)

PREFIX = 'gpu:'

NONE = 0   # not a GPU request
MAYBE = 1  # GPU request where candidates draw from a known GPU provider
GPU = 2    # GPU request

MODE_VALUES = (('vgpu', 'a mediated device or a vendor VFIO vGPU'),
               ('passthrough', 'a whole PCI function'))
# in the order of the health ranks they accept (see state.cache.HEALTH_RANK)
HEALTH_VALUES = (('healthy', 'healthy GPUs only (the default)'),
                 ('degraded_ok', 'degraded GPUs too'),
                 ('any', 'no health check, and no need for live state'))
# what GpuTopologyFilter requires of a multi-GPU server's GPUs, and the
# GpuFacts field all of them must share (design doc: Topology)
TOPOLOGY_VALUES = (
    ('nvlink', 'every GPU in one NVLink (xGMI) link domain'),
    ('switch', 'every GPU behind one PCIe switch'),
    ('numa', 'every GPU on one NUMA node'),
    ('prefer', 'the best-connected GPUs the host can give (the default)'),
    ('any', 'no preference: the intra-host policy alone'))
TOPOLOGY_FIELDS = {'nvlink': 'link_domain', 'switch': 'pci_switch',
                   'numa': 'numa_node'}
MODES = tuple(dict(MODE_VALUES))
HEALTH_POLICIES = tuple(dict(HEALTH_VALUES))
# highest accepted health rank per policy
HEALTH_MAX_RANK = {name: rank for rank, name in enumerate(HEALTH_POLICIES)}
# [gpu_scheduler] intra_host_policy's (state and conf import no scheduler)
POLICIES = scheduler_conf.POLICIES

GPU_RESOURCE_CLASSES = frozenset(['VGPU', 'PGPU', 'VGPU_DISPLAY_HEAD'])
# CUSTOM_VGPU_<MODEL>: the per-model mdev_class nova-conf writes
GPU_RC_PREFIXES = ('CUSTOM_GPU_', 'CUSTOM_VGPU_', 'CUSTOM_PCI_10DE_',
                   'CUSTOM_PCI_1002_')
# PCI vendors that make GPUs and little else a flavor would ask for
GPU_VENDOR_IDS = frozenset(['10de', '1002'])
# vendors that make GPUs among other devices: decided by the candidates
MAYBE_VENDOR_IDS = frozenset(['8086'])
_RESOURCES_RE = re.compile(r'^resources[a-zA-Z0-9_-]*:(.+)$')
MEMORY_UNITS = {'mb': 1, 'mib': 1, 'gb': 1024, 'gib': 1024}


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Key:
    """One ``gpu:`` key, as everything that reads or writes it sees it."""

    name: str
    field: str                # the GpuRequest field it sets
    filter: str               # the filter that enforces it (and its errors)
    help: str                 # what it means, one line
    values: tuple[tuple[str, str], ...] = ()  # enumerated: (value, meaning)
    pattern: str = ''         # free form: the whole value (re.fullmatch)
    allowed: str = ''         # free form: what the pattern allows, in words
    # free form: the match -> the parsed value (None: still not allowed)
    convert: Callable[[re.Match], Any] | None = None
    examples: tuple[str, ...] = ()  # free form: values it accepts
    constrains: bool = True   # asks something of the GPU (``constrained``)

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(dict(self.values))

    @property
    def rule(self) -> str:
        """What a value may be, in words."""
        return self.allowed or 'one of %s' % ', '.join(self.choices)

    def parse(self, value: str) -> Any:
        """The parsed value; ValueError saying what is allowed."""
        if self.values:  # exact, as the API's enum: no case, no blanks
            if value not in self.choices:
                raise ValueError(self.rule)
            return value
        m = re.fullmatch(self.pattern, value)
        parsed = self.convert(m) if m else None
        if parsed is None:
            raise ValueError(self.rule)
        return parsed


_list = r'\s*{0}\s*(?:,\s*{0}\s*)*'.format  # a comma-separated list


def _models(m: re.Match) -> tuple[str, ...] | None:
    models = tuple(naming.normalize_model(item.strip())
                   for item in m[0].split(','))
    return models if all(models) else None


KEYS = {k.name: k for k in (
    Key(name='gpu:model', field='models', filter='GpuModelFilter',
        help='GPU models the server may get; A100 matches A100_80GB_PCIE '
             '(a prefix at a "_"), T4 matches TESLA_T4 (brand words)',
        pattern=_list(r'[A-Za-z0-9][A-Za-z0-9 _.\-]*'), convert=_models,
        allowed='a comma-separated list of GPU models such as A100 or '
                'A100_80GB_PCIE',
        examples=('A100', 'A100_80GB_PCIE', 'NVIDIA L40S', 'T4')),
    Key(name='gpu:vendor', field='vendor', filter='GpuModelFilter',
        help='GPU vendor the server must get',
        values=tuple((v, '') for v in naming.VENDORS)),
    Key(name='gpu:mode', field='mode', filter='GpuModelFilter',
        help='How the GPU is offered', values=MODE_VALUES),
    Key(name='gpu:vgpu_type', field='vgpu_types', filter='GpuModelFilter',
        help='mdev type ids or names the vGPU may be of',
        pattern=_list(r'[A-Za-z0-9][A-Za-z0-9_.\-]*'),
        convert=lambda m: frozenset(i.strip() for i in m[0].split(',')),
        allowed='a comma-separated list of mdev type ids or names such as '
                'nvidia-471 or A100D-10C',
        examples=('nvidia-471', 'A100D-10C', 'A100D-1-10C,nvidia-472')),
    Key(name='gpu:memory_min', field='memory_min_mib',
        filter='GpuMemoryFilter',
        help='Least memory per GPU; for a vGPU the framebuffer of its type',
        pattern=r'\s*(\d+)\s*((?i:MB|MiB|GB|GiB))?\s*',
        convert=lambda m: int(m[1]) * MEMORY_UNITS[(m[2] or 'mib').lower()],
        allowed='an integer number of MiB, or with a unit MB, MiB, GB or '
                'GiB (e.g. 16384 or 16GB)',
        examples=('16384', '16GB', '16GiB', '512MiB', '40 GB')),
    Key(name='gpu:cuda_cc_min', field='cuda_cc_min',
        filter='GpuCapabilityFilter',
        help='Least CUDA compute capability', pattern=r'\s*(\d+)\.(\d+)\s*',
        convert=lambda m: (int(m[1]), int(m[2])),
        allowed='a CUDA compute capability X.Y such as 8.0',
        examples=('8.0', '9.0', '12.10')),
    Key(name='gpu:driver_min', field='driver_min',
        filter='GpuCapabilityFilter',
        help='Least GPU driver version, compared numerically part by part',
        pattern=r'\s*(\d+(?:\.\d+){0,3})\s*',
        convert=lambda m: tuple(int(p) for p in m[1].split('.')),
        allowed='a dotted driver version such as 550.54.15',
        examples=('550', '550.54', '550.54.15')),
    Key(name='gpu:health', field='health', filter='GpuHealthFilter',
        constrains=False, help='GPU health the server accepts',
        values=HEALTH_VALUES),
    Key(name='gpu:intra_host_policy', field='intra_host_policy',
        filter='GpuCandidateOrderFilter', constrains=False,
        help='Which GPU of the chosen host the server gets; overrides '
             '[gpu_scheduler] intra_host_policy',
        values=scheduler_conf.INTRA_HOST_POLICIES),
    Key(name='gpu:topology', field='topology', filter='GpuTopologyFilter',
        constrains=False,
        help='How the GPUs of a multi-GPU server must be connected',
        values=TOPOLOGY_VALUES),
    Key(name='gpu:power_profile', field='power_profile',
        filter='GpuPowerProfileFilter',
        help='The power profile the GPU must run under, exactly as the '
             "agents' [power] profiles name it",
        pattern=schema.POWER_PROFILE_PATTERN, convert=lambda m: m[0],
        allowed='one of %s, or a limit such as 250W or 80%%'
                % ', '.join(schema.POWER_PROFILES),
        examples=schema.POWER_PROFILES + ('250W', '80%')),
)}
# unknown gpu: keys are the model filter's to reject
UNKNOWN_KEY_FILTER = 'GpuModelFilter'
# what asks of the GPU itself (gpu:health too, unless it is "any", and
# gpu:topology when it requires a link, switch or NUMA node)
CONSTRAINT_FIELDS = tuple(k.field for k in KEYS.values() if k.constrains)


def misspelt(key: str) -> str | None:
    """``GPU:model``, `` gpu:model`` -> ``gpu:model``; None if right/other."""
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
    topology: str | None = None
    errors: tuple[SpecError, ...] = ()
    # asks something of the GPU itself (see CONSTRAINT_FIELDS)
    constrained: bool = False

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
    kind = _classify_rc((spec.get('resource_class') or '').upper())
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

    ``pci_specs``: the specs of the request's PCI requests (``vendor_id``,
    ``resource_class``...); ``resource_classes``: those of the request
    groups that do not come from the flavor (ports, accelerators).
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
            try:
                fields[known.field] = known.parse(str(value))
            except ValueError as exc:
                errors.append(SpecError(key, value, 'expected %s' % exc,
                                        known.filter))
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
                   or fields.get('health', 'any') != 'any'
                   or fields.get('topology') in TOPOLOGY_FIELDS)
    return GpuRequest(kind=kind, errors=tuple(errors),
                      constrained=constrained, **fields)


# -- RequestSpec -> GpuRequest ------------------------------------------

@functools.lru_cache(maxsize=1)
def _aliases(conf_aliases: tuple[str, ...]) -> dict:
    """nova.conf ``[pci] alias`` parsed by Nova, once per distinct value."""
    from nova.pci import request as pci_request

    # Nova memoizes its parse for the life of the process, across a
    # reload or another test's value
    cache_clear = getattr(pci_request.get_alias_from_config,
                          'cache_clear', None)
    if cache_clear is not None:
        cache_clear()
    try:
        return pci_request.get_alias_from_config()
    except Exception as exc:
        LOG.warning('Cannot read nova.conf [pci] alias (%s): PCI alias '
                    'requests count as possible GPU requests.', exc)
        return {}


def _alias_specs(alias_value: str) -> list[dict]:
    """Specs of ``pci_passthrough:alias`` from nova.conf ``[pci] alias``."""
    import nova.conf

    aliases = _aliases(tuple(nova.conf.CONF.pci.alias))
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
