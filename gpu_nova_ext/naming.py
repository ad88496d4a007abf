# SPDX-License-Identifier: Apache-2.0

"""One place for GPU model normalization and every trait name we write.

Pure functions with no I/O and no heavy imports: the agent, the Placement
translation, the scheduler plugins and the nova.conf generator all share
them, so a model is spelled the same everywhere.
"""
import base64
import datetime
import re

import os_traits

TRAIT_PREFIX = 'CUSTOM_GPU_'
OWNER_TRAIT = 'CUSTOM_GPU_OWNER_GPU_NOVA_EXT'
HOST_TRAIT = 'CUSTOM_GPU_HOST'
MIG_CAPABLE_TRAIT = 'CUSTOM_GPU_MIG_CAPABLE'
MIG_ENABLED_TRAIT = 'CUSTOM_GPU_MIG_ENABLED'

VENDORS = ('nvidia', 'amd', 'intel')
VENDOR_IDS = {'10de': 'nvidia', '1002': 'amd', '8086': 'intel'}

MODE_PASSTHROUGH = 'passthrough'
MODE_VGPU = 'vgpu'
MODE_VGPU_VFIO = 'vgpu-vfio'
MODE_MIG_VGPU = 'mig-vgpu'
MODES = (MODE_PASSTHROUGH, MODE_VGPU, MODE_VGPU_VFIO, MODE_MIG_VGPU)

# Memory sizes GPUs are sold with, in GB.  NVML and sysfs report somewhat
# less than the marketed size (a T4 reports 15 GiB, an L4 22.5 GiB).
MARKETED_MEMORY_GB = (1, 2, 3, 4, 5, 6, 8, 10, 11, 12, 16, 20, 24, 32, 40,
                      48, 64, 80, 94, 96, 128, 141, 144, 180, 192, 256, 288)

_VENDOR_WORDS = re.compile(r'^\s*(NVIDIA|AMD|INTEL)(\(R\))?[\s_\-]+',
                           re.IGNORECASE)
_NON_ALNUM = re.compile(r'[^A-Z0-9]+')
_TRAIT_RE = re.compile(r'^CUSTOM_[A-Z0-9_]+$')


def normalize_model(name: str) -> str:
    """NVML/PCI product name -> normalized model.

    Drops a leading vendor word, upper-cases, turns runs of
    non-alphanumerics into ``_`` and strips ``_`` at the ends:
    ``"NVIDIA A100 80GB PCIe"`` -> ``"A100_80GB_PCIE"``.
    """
    if not name:
        return ''
    stripped = _VENDOR_WORDS.sub('', name.strip(), count=1)
    return _NON_ALNUM.sub('_', stripped.upper()).strip('_')


# Brand words some products carry before the model itself (NVML names
# the T4 "Tesla T4"; AMD and Intel data-centre parts "Instinct MI210",
# "Data Center GPU Max 1550").  The normalized model keeps them, as the
# DESIGN rule says; matching a request also tries the model without them,
# so ``gpu:model=T4`` matches ``TESLA_T4``.
BRAND_PREFIXES = ('TESLA_', 'INSTINCT_', 'DATA_CENTER_GPU_')


def model_matches(requested: str, model: str) -> bool:
    """True when ``requested`` equals ``model`` or is its prefix at a ``_``.

    Both sides are normalized first: ``A100`` matches ``A100_80GB_PCIE``
    but not ``A1000``; ``T4`` matches ``TESLA_T4`` (brand words are
    optional in a request).
    """
    return normalized_model_matches(normalize_model(requested),
                                    normalize_model(model))


def normalized_model_matches(req: str, model: str) -> bool:
    """:func:`model_matches` for already normalized names (hot path)."""
    if not req or not model:
        return False
    if model == req or model.startswith(req + '_'):
        return True
    for brand in BRAND_PREFIXES:
        if model.startswith(brand) and not req.startswith(brand):
            rest = model[len(brand):]
            return rest == req or rest.startswith(req + '_')
    return False


def marketed_memory_gb(memory_mib: int) -> int:
    """Physical memory in MiB -> the marketed size in GB."""
    gib = memory_mib / 1024.0
    for size in MARKETED_MEMORY_GB:
        if size >= gib * 0.98:
            return size
    return int(round(gib))


def _custom(*parts: str) -> str:
    words = [_NON_ALNUM.sub('_', str(p).upper()).strip('_') for p in parts]
    trait = TRAIT_PREFIX + '_'.join(words)
    if not all(words) or not _TRAIT_RE.match(trait) or len(trait) > 255:
        raise ValueError('%r is not a valid custom trait name' % trait)
    return trait


def vendor_trait(vendor: str) -> str:
    return _custom('VENDOR', vendor)


def model_trait(model: str) -> str:
    return _custom('MODEL', normalize_model(model))


def memory_trait(memory_mib: int) -> str:
    return _custom('MEMORY', '%dGB' % marketed_memory_gb(memory_mib))


def cuda_cc_traits(cuda_cc: str) -> list[str]:
    """``"8.0"`` -> our trait plus os-traits' standard one where it has it."""
    major, _, minor = cuda_cc.partition('.')
    traits = [_custom('CUDA_CC', major, minor or '0')]
    std = 'HW_GPU_CUDA_COMPUTE_CAPABILITY_V%s_%s' % (major, minor or '0')
    if hasattr(os_traits, std):
        traits.append(std)
    return traits


def driver_trait(driver_version: str) -> str:
    """``"550.54.15"`` -> ``CUSTOM_GPU_DRIVER_550``."""
    return _custom('DRIVER', driver_version.split('.')[0])


def mode_trait(mode: str) -> str:
    """Offering mode -> trait; every vGPU flavour is ``MODE_VGPU``."""
    if mode == MODE_PASSTHROUGH:
        return _custom('MODE', 'PASSTHROUGH')
    return _custom('MODE', 'VGPU')


def model_resource_class(model: str) -> str:
    """Inventory class of our own providers in ``inventory`` mode."""
    return _custom(normalize_model(model))


def is_ours(trait: str) -> bool:
    """True for the traits the agent may add and remove.

    Reservation traits carry our prefix but belong to the operator's
    ``reserve``/``unreserve`` commands: the agent never touches them.
    """
    return (trait.startswith(TRAIT_PREFIX)
            and not trait.startswith(RESERVATION_PREFIX))


#: ``CUSTOM_GPU_RESERVED_<PROJECT>`` marks a GPU provider kept for a project.
RESERVATION_PREFIX = TRAIT_PREFIX + 'RESERVED_'
_B32_MARK = 'B32_'
_KEYSTONE_ID = re.compile(r'^[0-9a-f]{1,64}$')


def reservation_trait(project_id: str) -> str:
    """The trait that keeps a GPU provider for one project.

    Keystone's ids (lower-case hex) read back as upper-case hex
    (``CUSTOM_GPU_RESERVED_6F70...``); any other id is base32-encoded
    behind ``B32_``, so the mapping is one-to-one and reversible
    (:func:`reservation_project`).
    """
    if not project_id or len(project_id) > 64:
        raise ValueError('%r is not a valid project id' % (project_id,))
    if _KEYSTONE_ID.match(project_id):
        suffix = project_id.upper()
    else:
        suffix = _B32_MARK + base64.b32encode(
            project_id.encode('utf-8')).decode('ascii').rstrip('=')
    trait = RESERVATION_PREFIX + suffix
    if not _TRAIT_RE.match(trait) or len(trait) > 255:
        raise ValueError('%r is not a valid project id' % (project_id,))
    return trait


def reservation_project(trait: str) -> str | None:
    """The project a reservation trait names; None for any other trait."""
    if not trait.startswith(RESERVATION_PREFIX):
        return None
    suffix = trait[len(RESERVATION_PREFIX):]
    if not suffix.startswith(_B32_MARK):
        return suffix.lower() if re.match(r'^[0-9A-F]+$', suffix) else None
    data = suffix[len(_B32_MARK):]
    try:
        return base64.b32decode(
            data + '=' * (-len(data) % 8)).decode('utf-8')
    except (ValueError, UnicodeDecodeError):
        return None


def pgpu_provider_name(nodename: str, pci_address: str) -> str:
    """Name nova-compute gives the libvirt pGPU provider of a PCI device."""
    return '%s_pci_%s' % (nodename, re.sub(r'[:.]', '_', pci_address))


def pci_provider_name(nodename: str, pci_address: str) -> str:
    """Name nova-compute gives a PCI-in-Placement provider."""
    return '%s_%s' % (nodename, pci_address.upper())


def own_provider_name(nodename: str, pci_address: str) -> str:
    """Name of our own provider for a GPU in ``inventory`` mode."""
    return '%s_gpu_%s' % (nodename, pci_address)


_PCI_RE = re.compile(
    r'^(?:([0-9a-fA-F]{1,4}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})'
    r'[.:]([0-7])$')


def normalize_pci_address(address: str) -> str:
    """Any common spelling -> ``0000:3b:00.0``.

    Accepts NVML's ``00000000:3B:00.0``, libvirt's ``pci_0000_3b_00_0`` and
    a missing domain.  Raises ValueError for anything else.
    """
    addr = address.strip()
    if addr.startswith('pci_'):
        parts = addr[4:].split('_')
        if len(parts) == 4:
            addr = '%s:%s:%s.%s' % tuple(parts)
    m = _PCI_RE.match(addr.split(':', 1)[-1] if addr.count(':') == 2
                      and len(addr.split(':', 1)[0]) == 8 else addr)
    if not m:
        raise ValueError('%r is not a PCI address (expected like '
                         '0000:3b:00.0)' % address)
    domain, bus, slot, func = m.groups()
    return '%04x:%02x:%02x.%s' % (int(domain or '0', 16), int(bus, 16),
                                  int(slot, 16), func)


# --- vGPU type names (NVIDIA) ---------------------------------------------

_VGPU_NAME_PREFIX = re.compile(r'^\s*(GRID|NVIDIA)\s+', re.IGNORECASE)
# NVIDIA's vGPU type names (the type tables of NVIDIA's vGPU user guides):
#   time-sliced  <board>-<GB><series>[<heads>]   A100D-10C, T4-16Q, M60-0B,
#                                                P100-2B4, T4-1B4 (4 heads)
#   MIG-backed   <board>-<slices>-<GB><series>[<attr>]   A100D-1-10C,
#                H100XM-3-40C, A100-1-5CME (media extensions), DC-1-24CGFX
# <GB> 0 is 512 MiB (M60-0B).  The series is one letter (A, B, C, Q, ...).
_MIG_ATTRS = r'(?:ME|NOME|MEALL|GFX)?'
_VGPU_MIG = re.compile(r'-(\d+)-(\d+)([A-Z])' + _MIG_ATTRS + r'$')
_VGPU_TIME_SLICED = re.compile(r'-(\d+)([A-Z])(\d*)$')
_VENDOR_NAME = re.compile(r'^\s*(NVIDIA|AMD|INTEL)\b', re.IGNORECASE)


def vgpu_type_name(raw: str | None) -> str | None:
    """libvirt/sysfs/NVML vGPU type name -> the bare NVIDIA type name.

    ``"GRID A100D-10C"`` and ``"NVIDIA A100D-10C"`` -> ``"A100D-10C"``.
    """
    if raw is None:
        return None
    name = _VGPU_NAME_PREFIX.sub('', raw.strip(), count=1).strip()
    return name or None


def vgpu_type_framebuffer_mib(name: str | None) -> int | None:
    """Framebuffer of an NVIDIA vGPU type from its name, when NVML is absent.

    ``A100D-10C`` -> 10240; ``M60-0B`` -> 512; ``P100-2B4`` (2 GB, four
    heads) -> 2048; ``A100D-3-40C`` and ``A100-1-5CME`` (MIG-backed) ->
    40960 and 5120; unknown shapes -> None.  The number in the name is
    NVIDIA's nominal size (``H100-7-80C`` has 80 GB in its name, 81 in
    NVIDIA's table): what a flavor's ``gpu:memory_min`` is written against.
    """
    bare = vgpu_type_name(name)
    if not bare:
        return None
    upper = bare.upper()
    m = _VGPU_MIG.search(upper)
    if m:
        gb = int(m.group(2))
    else:
        m = _VGPU_TIME_SLICED.search(upper)
        if not m:
            return None
        gb = int(m.group(1))
    return 512 if gb == 0 else gb * 1024


def is_mig_backed_vgpu_type(name: str | None) -> bool:
    """True for MIG-backed NVIDIA vGPU types (``A100D-1-10C``)."""
    bare = vgpu_type_name(name)
    return bool(bare and _VGPU_MIG.search(bare.upper()))


def nvidia_mdev_type_id(vgpu_type_id: int) -> str:
    """NVML vGPU type id -> the mdev type id libvirt and Nova use."""
    return 'nvidia-%d' % vgpu_type_id


def vendor_from_name(name: str | None) -> str | None:
    """``"NVIDIA A100 80GB PCIe"`` -> ``nvidia``; no vendor word -> None."""
    if not name:
        return None
    m = _VENDOR_NAME.match(name)
    return m.group(1).lower() if m else None


# --- the host's GPU state on the compute node (root) provider --------------
# design doc: Placement ownership.  What the operator commands need of the
# agents' state, readable with a clouds.yaml alone: the driver branches the
# host's GPUs run, which GPUs are not healthy, and when the agent last
# confirmed it.  Nova keeps these CUSTOM_ traits on the root provider.

HOST_DRIVER_PREFIX = TRAIT_PREFIX + 'HOST_DRIVER_'
#: a GPU of the host whose driver the agent could not read
HOST_DRIVER_UNKNOWN = HOST_DRIVER_PREFIX + 'UNKNOWN'
#: per GPU health state that is not healthy -> its trait prefix
HEALTH_PREFIXES = {'degraded': TRAIT_PREFIX + 'DEGRADED_',
                   'unhealthy': TRAIT_PREFIX + 'UNHEALTHY_'}
HOST_REPORTED_PREFIX = TRAIT_PREFIX + 'HOST_REPORTED_'
#: the agent renews its reported stamp when the host's state changes and
#: at least this often when it does not (one root trait write an hour per
#: host says the agent is alive); readers call a stamp older than twice
#: this stale
HOST_REPORTED_REFRESH = datetime.timedelta(hours=1)
_STAMP_FORMAT = '%Y%m%dT%H%MZ'
_SLUG_RE = re.compile(r'^([0-9A-F]{4})_([0-9A-F]{2})_([0-9A-F]{2})_([0-7])$')


def host_driver_trait(driver_version: str | None) -> str:
    """``"550.54.15"`` -> ``CUSTOM_GPU_HOST_DRIVER_550``; None -> UNKNOWN."""
    if not driver_version:
        return HOST_DRIVER_UNKNOWN
    return _custom('HOST_DRIVER', driver_version.split('.')[0])


def host_driver_branch(trait: str) -> str | None:
    """The branch of a host driver trait; None for any other trait.

    ``UNKNOWN`` for :data:`HOST_DRIVER_UNKNOWN`.
    """
    if not trait.startswith(HOST_DRIVER_PREFIX):
        return None
    return trait[len(HOST_DRIVER_PREFIX):].lower() or None


def gpu_health_trait(state: str, pci_address: str) -> str | None:
    """``CUSTOM_GPU_UNHEALTHY_0000_3B_00_0``; None for a healthy GPU."""
    prefix = HEALTH_PREFIXES.get(state)
    if prefix is None:
        return None
    slug = re.sub(r'[:.]', '_', normalize_pci_address(pci_address).upper())
    return prefix + slug


def gpu_health(trait: str) -> tuple[str, str] | None:
    """(state, PCI address) of a GPU health trait; None for any other."""
    for state, prefix in HEALTH_PREFIXES.items():
        if trait.startswith(prefix):
            m = _SLUG_RE.match(trait[len(prefix):])
            if m:
                return state, '%s:%s:%s.%s' % tuple(
                    p.lower() for p in m.groups())
    return None


def host_reported_trait(when: datetime.datetime) -> str:
    """``CUSTOM_GPU_HOST_REPORTED_20261203T1655Z`` of a UTC datetime.

    Minute precision: the trait names a time, Placement has no time of its
    own on a provider or a trait.
    """
    return HOST_REPORTED_PREFIX + when.strftime(_STAMP_FORMAT)


def host_reported_at(trait: str) -> datetime.datetime | None:
    """The UTC datetime a host reported trait names; None for others."""
    if not trait.startswith(HOST_REPORTED_PREFIX):
        return None
    try:
        return datetime.datetime.strptime(
            trait[len(HOST_REPORTED_PREFIX):], _STAMP_FORMAT).replace(
                tzinfo=datetime.timezone.utc)
    except ValueError:
        return None


def is_host_state(trait: str) -> bool:
    """True for the traits that publish a host's GPU state on its root."""
    return (trait.startswith((HOST_DRIVER_PREFIX, HOST_REPORTED_PREFIX))
            or gpu_health(trait) is not None)
