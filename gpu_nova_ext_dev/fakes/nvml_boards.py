# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's boards: models, their vGPU types, one device's state.

Part of :mod:`gpu_nova_ext_dev.fakes.nvml` (see there): the static
facts of each board model as NVML reports them (``PROFILES``), the runtime
metrics of a device (:class:`Metrics`), and :class:`FakeDevice`.
"""
import ctypes
import dataclasses
import hashlib
import re
import time
import uuid as uuidlib

import pynvml

MIB = 1024 * 1024
#: what NVML says of an NVSwitch at the far end of an NVLink (GH100 NVSwitch)
NVSWITCH_PCI_DEVICE_ID = 0x22A310DE

DEFAULT_PCI_ADDRESSES = (
    '0000:3b:00.0', '0000:5e:00.0', '0000:86:00.0', '0000:af:00.0',
    '0000:18:00.0', '0000:d8:00.0', '0000:31:00.0', '0000:4b:00.0',
    '0000:ca:00.0', '0000:e1:00.0', '0000:19:00.0', '0000:db:00.0',
    '0000:9a:00.0', '0000:9b:00.0', '0000:c1:00.0', '0000:c2:00.0',
)

_PCI_RE = re.compile(
    r'^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):'
    r'(?P<dev>[0-9a-fA-F]{1,2})\.(?P<fn>[0-7])$')


def parse_pci(address: str) -> tuple[int, int, int, int]:
    """(domain, bus, device, function) from any NVML/libvirt spelling."""
    m = _PCI_RE.match(address.strip())
    if not m:
        raise ValueError('not a PCI address: %r' % address)
    return (int(m.group('domain') or '0', 16), int(m.group('bus'), 16),
            int(m.group('dev'), 16), int(m.group('fn'), 16))


@dataclasses.dataclass(frozen=True)
class VgpuType:
    type_id: int            # NVML vGPU type id; the mdev type is nvidia-<id>
    name: str               # e.g. A100D-10C
    vgpu_class: str         # Compute, Quadro, NVS
    framebuffer_mib: int
    max_instances: int


@dataclasses.dataclass(frozen=True)
class GpuProfile:
    """Static facts of one board model, as NVML reports them."""

    key: str
    name: str
    arch: int
    pci_device_id: int           # (device << 16) | vendor
    pci_subsystem_id: int
    memory_mib: int
    reserved_mib: int
    cuda_cc: tuple[int, int]
    mig_capable: bool
    shutdown_c: int
    slowdown_c: int
    gpu_max_c: int
    mem_max_c: int | None
    power_default_limit_mw: int
    power_min_limit_mw: int
    power_max_limit_mw: int
    max_sm_clock: int
    max_mem_clock: int
    vgpu_types: tuple[VgpuType, ...] = ()
    # C functions and field ids this board does not support.
    unsupported: frozenset = frozenset()
    unsupported_fields: frozenset = frozenset()
    idle_power_mw: int = 50000
    #: its MIG geometry (a key of ``inventory.mig_profiles.BOARDS``)
    mig_board: str | None = None
    #: NVLink ports (0: no NVLink, the NVLink calls are NotSupported)
    nvlinks: int = 0


_FAN = 'nvmlDeviceGetFanSpeed'
_RETIRED = frozenset({'nvmlDeviceGetRetiredPages',
                      'nvmlDeviceGetRetiredPages_v2',
                      'nvmlDeviceGetRetiredPagesPendingStatus'})
_RETIRED_FIELDS = frozenset({
    pynvml.NVML_FI_DEV_RETIRED_SBE, pynvml.NVML_FI_DEV_RETIRED_DBE,
    pynvml.NVML_FI_DEV_RETIRED_PENDING})
_REMAP_FIELDS = frozenset({
    pynvml.NVML_FI_DEV_REMAPPED_COR, pynvml.NVML_FI_DEV_REMAPPED_UNC,
    pynvml.NVML_FI_DEV_REMAPPED_PENDING, pynvml.NVML_FI_DEV_REMAPPED_FAILURE})
_ENCODER = 'nvmlDeviceGetEncoderUtilization'


def _types(prefix, first_id, klass, specs):
    return tuple(VgpuType(first_id + i, '%s-%s' % (prefix, suffix), klass,
                          fb, inst)
                 for i, (suffix, fb, inst) in enumerate(specs))


PROFILES: dict[str, GpuProfile] = {p.key: p for p in (
    GpuProfile(
        key='A100_80GB_PCIE', name='NVIDIA A100 80GB PCIe',
        arch=pynvml.NVML_DEVICE_ARCH_AMPERE,
        pci_device_id=0x20B510DE, pci_subsystem_id=0x153310DE,
        memory_mib=81920, reserved_mib=613, cuda_cc=(8, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=85, mem_max_c=95,
        power_default_limit_mw=300000, power_min_limit_mw=150000,
        power_max_limit_mw=300000, max_sm_clock=1410, max_mem_clock=1512,
        vgpu_types=_types('A100D', 469, 'Compute', (
            ('4C', 4096, 20), ('8C', 8192, 10), ('10C', 10240, 8),
            ('16C', 16384, 5), ('20C', 20480, 4), ('40C', 40960, 2),
            ('80C', 81920, 1))),
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, mig_board='A100_80GB',
        nvlinks=12),
    GpuProfile(
        key='H100_SXM5_80GB', name='NVIDIA H100 80GB HBM3',
        arch=pynvml.NVML_DEVICE_ARCH_HOPPER,
        pci_device_id=0x233010DE, pci_subsystem_id=0x16C110DE,
        memory_mib=81559, reserved_mib=541, cuda_cc=(9, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=87, mem_max_c=95,
        power_default_limit_mw=700000, power_min_limit_mw=200000,
        power_max_limit_mw=700000, max_sm_clock=1980, max_mem_clock=2619,
        vgpu_types=_types('H100XM', 700, 'Compute', (
            ('4C', 4096, 20), ('8C', 8192, 10), ('10C', 10240, 8),
            ('16C', 16384, 5), ('20C', 20480, 4), ('40C', 40960, 2),
            ('80C', 81920, 1))),
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=70000,
        mig_board='H100_80GB', nvlinks=18),
    # the boards below serve the MIG model (their vGPU types are
    # MIG-backed only in real drivers: none here)
    GpuProfile(
        key='A100_SXM4_40GB', name='NVIDIA A100-SXM4-40GB',
        arch=pynvml.NVML_DEVICE_ARCH_AMPERE,
        pci_device_id=0x20B010DE, pci_subsystem_id=0x134F10DE,
        memory_mib=40960, reserved_mib=573, cuda_cc=(8, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=85, mem_max_c=95,
        power_default_limit_mw=400000, power_min_limit_mw=100000,
        power_max_limit_mw=400000, max_sm_clock=1410, max_mem_clock=1215,
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, mig_board='A100_40GB',
        nvlinks=12),
    GpuProfile(
        key='A30', name='NVIDIA A30',
        arch=pynvml.NVML_DEVICE_ARCH_AMPERE,
        pci_device_id=0x20B710DE, pci_subsystem_id=0x153210DE,
        memory_mib=24576, reserved_mib=431, cuda_cc=(8, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=85, mem_max_c=95,
        power_default_limit_mw=165000, power_min_limit_mw=100000,
        power_max_limit_mw=165000, max_sm_clock=1440, max_mem_clock=1215,
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=30000,
        mig_board='A30', nvlinks=4),
    GpuProfile(
        key='H200', name='NVIDIA H200',
        arch=pynvml.NVML_DEVICE_ARCH_HOPPER,
        pci_device_id=0x233510DE, pci_subsystem_id=0x18BE10DE,
        memory_mib=143771, reserved_mib=693, cuda_cc=(9, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=87, mem_max_c=95,
        power_default_limit_mw=700000, power_min_limit_mw=200000,
        power_max_limit_mw=700000, max_sm_clock=1980, max_mem_clock=3201,
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=75000,
        mig_board='H200', nvlinks=18),
    GpuProfile(
        key='B200', name='NVIDIA B200',
        arch=pynvml.NVML_DEVICE_ARCH_BLACKWELL,
        pci_device_id=0x290110DE, pci_subsystem_id=0x199910DE,
        memory_mib=183359, reserved_mib=795, cuda_cc=(10, 0),
        mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=87, mem_max_c=95,
        power_default_limit_mw=1000000, power_min_limit_mw=200000,
        power_max_limit_mw=1000000, max_sm_clock=1965, max_mem_clock=3996,
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=140000,
        mig_board='B200', nvlinks=18),
    GpuProfile(
        key='H100_NVL', name='NVIDIA H100 NVL',
        arch=pynvml.NVML_DEVICE_ARCH_HOPPER,
        pci_device_id=0x232110DE, pci_subsystem_id=0x183910DE,
        memory_mib=95830, reserved_mib=600, cuda_cc=(9, 0), mig_capable=True,
        shutdown_c=92, slowdown_c=89, gpu_max_c=87, mem_max_c=95,
        power_default_limit_mw=400000, power_min_limit_mw=200000,
        power_max_limit_mw=400000, max_sm_clock=1785, max_mem_clock=2619,
        unsupported=frozenset({_FAN, _ENCODER}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=60000,
        nvlinks=18),
    GpuProfile(
        key='L40S', name='NVIDIA L40S',
        arch=pynvml.NVML_DEVICE_ARCH_ADA,
        pci_device_id=0x26B910DE, pci_subsystem_id=0x185110DE,
        memory_mib=46068, reserved_mib=566, cuda_cc=(8, 9), mig_capable=False,
        shutdown_c=95, slowdown_c=92, gpu_max_c=87, mem_max_c=None,
        power_default_limit_mw=350000, power_min_limit_mw=100000,
        power_max_limit_mw=350000, max_sm_clock=2520, max_mem_clock=9001,
        unsupported=frozenset({_FAN, 'nvmlDeviceGetMigMode'}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS | {pynvml.NVML_FI_DEV_MEMORY_TEMP},
        idle_power_mw=35000),
    GpuProfile(
        key='L4', name='NVIDIA L4',
        arch=pynvml.NVML_DEVICE_ARCH_ADA,
        pci_device_id=0x27B810DE, pci_subsystem_id=0x16CA10DE,
        memory_mib=23034, reserved_mib=326, cuda_cc=(8, 9), mig_capable=False,
        shutdown_c=95, slowdown_c=92, gpu_max_c=87, mem_max_c=None,
        power_default_limit_mw=72000, power_min_limit_mw=40000,
        power_max_limit_mw=72000, max_sm_clock=2040, max_mem_clock=6251,
        vgpu_types=_types('L4', 815, 'Quadro', (
            ('1Q', 1024, 24), ('2Q', 2048, 12), ('4Q', 4096, 6),
            ('6Q', 6144, 4), ('12Q', 12288, 2), ('24Q', 24576, 1))),
        unsupported=frozenset({_FAN, 'nvmlDeviceGetMigMode'}) | _RETIRED,
        unsupported_fields=_RETIRED_FIELDS | {pynvml.NVML_FI_DEV_MEMORY_TEMP},
        idle_power_mw=16000),
    GpuProfile(
        key='T4', name='Tesla T4',
        arch=pynvml.NVML_DEVICE_ARCH_TURING,
        pci_device_id=0x1EB810DE, pci_subsystem_id=0x12A210DE,
        memory_mib=15360, reserved_mib=250, cuda_cc=(7, 5), mig_capable=False,
        shutdown_c=96, slowdown_c=93, gpu_max_c=85, mem_max_c=None,
        power_default_limit_mw=70000, power_min_limit_mw=60000,
        power_max_limit_mw=70000, max_sm_clock=1590, max_mem_clock=5001,
        vgpu_types=_types('T4', 222, 'Quadro', (
            ('1Q', 1024, 16), ('2Q', 2048, 8), ('4Q', 4096, 4),
            ('8Q', 8192, 2), ('16Q', 16384, 1))),
        unsupported=frozenset({_FAN, 'nvmlDeviceGetMigMode',
                               'nvmlDeviceGetRemappedRows'}),
        unsupported_fields=_REMAP_FIELDS | {pynvml.NVML_FI_DEV_MEMORY_TEMP},
        idle_power_mw=10000),
)}


@dataclasses.dataclass
class Metrics:
    """Runtime values of one device; set them with ``FakeNvml.set_metrics``.

    Units are NVML's own where NVML has one (mW, mJ, KB/s, MHz).
    """

    gpu_util: int = 0                 # %
    mem_util: int = 0                 # %
    memory_used_mib: int = 0          # without the driver's reserved memory
    temperature_c: int = 35
    memory_temperature_c: int = 40
    power_mw: int | None = None       # None: the profile's idle power
    energy_mj: int = 0                # advances with power over time
    graphics_clock_mhz: int = 210
    sm_clock_mhz: int = 210
    mem_clock_mhz: int | None = None  # None: the profile's max
    video_clock_mhz: int = 795
    clocks_event_reasons: int = pynvml.nvmlClocksEventReasonGpuIdle
    pstate: int = 0
    fan_pct: int = 0
    pcie_tx_kbps: int = 0
    pcie_rx_kbps: int = 0
    pcie_replay: int = 0
    enc_util: int = 0
    dec_util: int = 0
    ecc_sbe_volatile: int = 0
    ecc_dbe_volatile: int = 0
    ecc_sbe_aggregate: int = 0
    ecc_dbe_aggregate: int = 0
    retired_sbe_pages: int = 0
    retired_dbe_pages: int = 0
    retired_pending: int = 0
    remapped_cor: int = 0
    remapped_unc: int = 0
    remap_pending: int = 0
    remap_failure: int = 0
    power_limit_mw: int | None = None  # None: the profile's default


@dataclasses.dataclass
class DeviceSpec:
    """One GPU of the fake host: a profile and what differs from defaults."""

    profile: str | GpuProfile
    pci_address: str | None = None
    uuid: str | None = None
    serial: str | None = None
    mig_enabled: bool = False
    metrics: dict = dataclasses.field(default_factory=dict)
    errors: dict = dataclasses.field(default_factory=dict)
    field_errors: dict = dataclasses.field(default_factory=dict)
    #: the remote PCI address (a GPU or an NVSwitch) of each active
    #: NVLink, in link order; links past these are inactive
    nvlinks: tuple[str, ...] = ()
    #: the placement ``nvmlDeviceGetTopologyCommonAncestor`` compares
    numa_node: int | None = None
    pci_switch: str | None = None
    root_port: str | None = None


class FakeDevice:
    """State of one fake GPU; its ``handle`` is a real c_nvmlDevice_t."""

    def __init__(self, index: int, spec: DeviceSpec):
        profile = spec.profile
        if isinstance(profile, str):
            profile = PROFILES[profile]
        self.index = index
        self.profile = profile
        address = spec.pci_address or DEFAULT_PCI_ADDRESSES[index]
        self.pci = parse_pci(address)
        seed = hashlib.sha256(
            ('%s/%s' % (profile.key, address)).encode()).digest()
        self.uuid = spec.uuid or 'GPU-%s' % uuidlib.UUID(bytes=seed[:16])
        self.serial = spec.serial or '13%011d' % (
            int.from_bytes(seed[16:24], 'big') % 10 ** 11)
        self.mig_current = int(spec.mig_enabled)
        self.mig_pending = int(spec.mig_enabled)
        #: GPU instances by GPU-instance id (``fakes.nvml_mig``)
        self.gpu_instances: dict = {}
        #: what keeps a MIG mode change pending: None (the driver resets
        #: the GPU at once), NVML_ERROR_IN_USE (a process holds it) or
        #: NVML_ERROR_RESET_REQUIRED (a platform without GPU reset)
        self.mig_activation_blocker: int | None = None
        self.metrics = Metrics()
        for key, value in spec.metrics.items():
            set_metric(self.metrics, key, value)
        self.errors = {name: pynvml.NVML_ERROR_NOT_SUPPORTED
                       for name in profile.unsupported}
        self.errors.update(spec.errors)
        self.field_errors = {fid: pynvml.NVML_ERROR_NOT_SUPPORTED
                             for fid in profile.unsupported_fields}
        self.field_errors.update(spec.field_errors)
        self.lost = False
        self.xids: list[int] = []
        self.active_vgpus: list[tuple[int, int, int]] = []  # (id, type, sm)
        # vGPU instance id -> (mdev UUID or None, VM UUID or None)
        self.vgpu_vms: dict[int, tuple[str | None, str | None]] = {}
        if len(spec.nvlinks) > profile.nvlinks:
            raise ValueError('%s has %d NVLinks, not %d' % (
                profile.key, profile.nvlinks, len(spec.nvlinks)))
        self.nvlinks = tuple(parse_pci(a) for a in spec.nvlinks)
        self.numa_node = spec.numa_node
        self.pci_switch = spec.pci_switch
        self.root_port = spec.root_port
        self._energy_at = time.monotonic()
        self._struct = pynvml.struct_c_nvmlDevice_t()
        self.handle = ctypes.pointer(self._struct)

    @property
    def bus_id(self) -> str:
        """NVML's spelling: ``00000000:3B:00.0``."""
        return '%08X:%02X:%02X.%X' % self.pci

    @property
    def pci_address(self) -> str:
        """The project's (and libvirt's) spelling: ``0000:3b:00.0``."""
        return '%04x:%02x:%02x.%x' % self.pci

    def power_mw(self) -> int:
        m = self.metrics
        return m.power_mw if m.power_mw is not None else (
            self.profile.idle_power_mw)

    def power_limit_mw(self) -> int:
        m = self.metrics
        return m.power_limit_mw if m.power_limit_mw is not None else (
            self.profile.power_default_limit_mw)

    def energy_mj(self) -> int:
        now = time.monotonic()
        self.metrics.energy_mj += int(
            self.power_mw() * (now - self._energy_at))
        self._energy_at = now
        return self.metrics.energy_mj


def set_metric(metrics: Metrics, key: str, value) -> None:
    if key not in Metrics.__dataclass_fields__:
        raise KeyError('unknown fake NVML metric %r (known: %s)' % (
            key, ', '.join(sorted(Metrics.__dataclass_fields__))))
    setattr(metrics, key, value)
