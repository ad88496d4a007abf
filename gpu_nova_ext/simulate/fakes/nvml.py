"""A fake NVML library under the real ``pynvml`` module (test code).

The real ``pynvml`` (nvidia-ml-py) wraps ``libnvidia-ml.so.1`` through
ctypes: every wrapper looks the C function up with
``getattr(pynvml.nvmlLib, name)`` and calls it with ctypes arguments
(``byref()`` outputs, ``create_string_buffer`` buffers, structures, device
handles of type ``POINTER(struct_c_nvmlDevice_t)``), then turns the return
code into an exception with its own ``_nvmlCheckReturn``.  This fixture puts
a Python object in place of the shared library whose attributes implement
that C ABI.  So the code under test calls the *real* pynvml wrappers, gets
real ctypes structures back and real ``NVMLError_*`` exceptions raised, as
on an NVIDIA host; nothing in ``pynvml`` is patched but ``nvmlLib`` and its
function pointer cache (both restored on cleanup).

Usage::

    from gpu_nova_ext.simulate.fakes import nvml as fake_nvml

    fake = self.useFixture(fake_nvml.FakeNvml(['A100_80GB_PCIE', 'L4']))
    import pynvml
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByPciBusId('0000:3b:00.0')
    pynvml.nvmlDeviceGetName(h)            # 'NVIDIA A100 80GB PCIe'
    pynvml.nvmlDeviceGetMigMode(fake.devices[1].handle)  # NotSupported

Building a host:

* ``FakeNvml(gpus)``: ``gpus`` is a list of profile names (see
  ``PROFILES``: ``A100_80GB_PCIE``, ``H100_SXM5_80GB``, ``L4``, ``T4``),
  :class:`GpuProfile` objects or :class:`DeviceSpec` (profile plus a chosen
  PCI address, UUID, serial, MIG mode, metrics, errors).  Default PCI
  addresses are ``0000:3b:00.0``, ``0000:5e:00.0``, ``0000:86:00.0``,
  ``0000:af:00.0``, ... in index order (``DEFAULT_PCI_ADDRESSES``); UUIDs
  and serials are deterministic.  ``driver_version`` (``550.54.15``) and
  ``cuda_driver_version`` (``12040``) are host-wide.
* ``FakeNvml([], library=False)``: no ``libnvidia-ml.so.1`` (``nvmlLib``
  stays None, the real loader raises ``NVMLError_LibraryNotFound`` on this
  GPU-less machine).
* ``FakeNvml(gpus, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)``:
  ``nvmlInit`` fails (``NVMLError_DriverNotLoaded``).

At run time (``gpu`` is an index, a PCI address in any NVML/libvirt
spelling, a UUID or a :class:`FakeDevice`):

* ``fake.set_metrics(gpu, temperature_c=95, gpu_util=80, ...)``: the
  names are the fields of :class:`Metrics`; an unknown name raises.
* ``fake.set_error(gpu, 'nvmlDeviceGetFanSpeed', NVML_ERROR_NO_PERMISSION)``
  (``None`` clears) and ``fake.set_field_error(gpu, NVML_FI_..., code)``:
  a per-function / per-field return code.  Profiles already make the
  fields real boards lack NotSupported (fan on passive boards, memory
  temperature on GDDR boards, page retirement on Ampere and later, row
  remapping before Ampere, MIG on L4/T4, encoder on A100/H100).
* ``fake.lose(gpu)`` / ``fake.lose(gpu, False)``: every call on the
  device returns ``NVML_ERROR_GPU_IS_LOST`` (handles stay valid, as in
  NVML).
* ``fake.inject_xid(gpu, 79)``: record the XID and deliver it to every
  event set registered for XID events on that device, through the real
  ``nvmlEventSetCreate`` / ``nvmlDeviceRegisterEvents`` /
  ``nvmlEventSetWait_v2`` path.  ``inject_event(gpu, event_type, data)``
  for other event types (double-bit ECC, ...).
* ``fake.set_active_vgpus(gpu, [(type_id, sm_util_pct), ...])``.
* ``fake.calls``: a ``collections.Counter`` of C function names called
  (to assert that a NotSupported field is not retried).

Tests must run under the fixture only: ``pynvml.nvmlLib`` is process
global, so two FakeNvml fixtures must not be active at once.

The fixture is not thread-safe against concurrent ``set_*`` calls, but
event delivery uses a ``queue.Queue`` so a sampler thread may wait on an
event set while the test injects.
"""
import collections
import ctypes
import dataclasses
import hashlib
import queue
import re
import threading
import time
import uuid as uuidlib

import fixtures
import pynvml

MIB = 1024 * 1024

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
        unsupported_fields=_RETIRED_FIELDS),
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
        unsupported_fields=_RETIRED_FIELDS, idle_power_mw=70000),
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
        self.metrics = Metrics()
        for key, value in spec.metrics.items():
            _set_metric(self.metrics, key, value)
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


def _set_metric(metrics: Metrics, key: str, value) -> None:
    if key not in Metrics.__dataclass_fields__:
        raise KeyError('unknown fake NVML metric %r (known: %s)' % (
            key, ', '.join(sorted(Metrics.__dataclass_fields__))))
    setattr(metrics, key, value)


class _EventSet:
    def __init__(self):
        self.struct = pynvml.struct_c_nvmlEventSet_t()
        self.registered: dict[int, int] = {}   # device index -> mask
        self.queue: queue.Queue = queue.Queue()


_SUPPORTED_EVENTS = (
    pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeClock)


def _out(arg):
    """The ctypes object behind a byref() argument (or the object itself)."""
    return getattr(arg, '_obj', arg)


def _put_string(buf, text: str, size) -> int:
    data = text.encode()
    size = _out(size)
    size = size.value if hasattr(size, 'value') else int(size)
    if len(data) + 1 > size:
        return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    buf = _out(buf)
    ctypes.memmove(buf, data + b'\0', len(data) + 1)
    return pynvml.NVML_SUCCESS


def _value(arg) -> int:
    return arg.value if hasattr(arg, 'value') else int(arg)


def _device_fn(func):
    """Resolve the handle, apply lost/error/uninitialized rules."""
    name = func.__name__

    def wrapper(self, handle, *args):
        self.fake.calls[name] += 1
        if not self.fake.initialized:
            return pynvml.NVML_ERROR_UNINITIALIZED
        dev = self.fake.device_by_handle(handle)
        if dev is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if dev.lost:
            return pynvml.NVML_ERROR_GPU_IS_LOST
        code = dev.errors.get(name)
        if code is not None:
            return code
        return func(self, dev, *args)
    wrapper.__name__ = name
    return wrapper


def _system_fn(func):
    name = func.__name__

    def wrapper(self, *args):
        self.fake.calls[name] += 1
        if not self.fake.initialized:
            return pynvml.NVML_ERROR_UNINITIALIZED
        return func(self, *args)
    wrapper.__name__ = name
    return wrapper


_FIELD_VALUES = {
    # field id: (value type, function of the device)
    pynvml.NVML_FI_DEV_ECC_CURRENT: (1, lambda d: 1),
    pynvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL: (
        3, lambda d: d.metrics.ecc_sbe_volatile),
    pynvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL: (
        3, lambda d: d.metrics.ecc_dbe_volatile),
    pynvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL: (
        3, lambda d: d.metrics.ecc_sbe_aggregate),
    pynvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL: (
        3, lambda d: d.metrics.ecc_dbe_aggregate),
    pynvml.NVML_FI_DEV_RETIRED_SBE: (
        3, lambda d: d.metrics.retired_sbe_pages),
    pynvml.NVML_FI_DEV_RETIRED_DBE: (
        3, lambda d: d.metrics.retired_dbe_pages),
    pynvml.NVML_FI_DEV_RETIRED_PENDING: (
        3, lambda d: d.metrics.retired_pending),
    pynvml.NVML_FI_DEV_REMAPPED_COR: (1, lambda d: d.metrics.remapped_cor),
    pynvml.NVML_FI_DEV_REMAPPED_UNC: (1, lambda d: d.metrics.remapped_unc),
    pynvml.NVML_FI_DEV_REMAPPED_PENDING: (
        1, lambda d: d.metrics.remap_pending),
    pynvml.NVML_FI_DEV_REMAPPED_FAILURE: (
        1, lambda d: d.metrics.remap_failure),
    pynvml.NVML_FI_DEV_MEMORY_TEMP: (
        1, lambda d: d.metrics.memory_temperature_c),
    pynvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER: (
        3, lambda d: d.metrics.pcie_replay),
    pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (3, FakeDevice.energy_mj),
    pynvml.NVML_FI_DEV_POWER_INSTANT: (1, FakeDevice.power_mw),
    pynvml.NVML_FI_DEV_POWER_CURRENT_LIMIT: (1, FakeDevice.power_limit_mw),
}
_VALUE_ATTR = {1: 'uiVal', 3: 'ullVal'}


class FakeNvmlLibrary:
    """Stands for ``libnvidia-ml.so.1``: C functions as Python callables.

    Each method takes ctypes arguments exactly as pynvml passes them and
    returns an ``nvmlReturn_t`` code.  A function NVML has but this class
    lacks gives the real ``NVMLError_FunctionNotFound``.
    """

    def __init__(self, fake: 'FakeNvml'):
        self.fake = fake

    # -- init / system --------------------------------------------------
    def nvmlInitWithFlags(self, flags):
        self.fake.calls['nvmlInitWithFlags'] += 1
        if self.fake.init_error is not None:
            return self.fake.init_error
        self.fake.init_count += 1
        return pynvml.NVML_SUCCESS

    def nvmlInit_v2(self):
        return self.nvmlInitWithFlags(0)

    def nvmlShutdown(self):
        self.fake.calls['nvmlShutdown'] += 1
        if not self.fake.initialized:
            return pynvml.NVML_ERROR_UNINITIALIZED
        self.fake.init_count -= 1
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlSystemGetDriverVersion(self, buf, size):
        return _put_string(buf, self.fake.driver_version, size)

    @_system_fn
    def nvmlSystemGetNVMLVersion(self, buf, size):
        return _put_string(buf, '12.' + self.fake.driver_version, size)

    @_system_fn
    def nvmlSystemGetCudaDriverVersion(self, out):
        _out(out).value = self.fake.cuda_driver_version
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlSystemGetCudaDriverVersion_v2(self, out):
        _out(out).value = self.fake.cuda_driver_version
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlDeviceGetCount_v2(self, out):
        _out(out).value = len(self.fake.devices)
        return pynvml.NVML_SUCCESS

    def _set_handle(self, out, dev):
        _out(out).contents = dev._struct
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlDeviceGetHandleByIndex_v2(self, index, out):
        index = _value(index)
        if not 0 <= index < len(self.fake.devices):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return self._set_handle(out, self.fake.devices[index])

    @_system_fn
    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id, out):
        try:
            wanted = parse_pci(_value(bus_id).decode())
        except (ValueError, AttributeError):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        for dev in self.fake.devices:
            if dev.pci == wanted:
                return self._set_handle(out, dev)
        return pynvml.NVML_ERROR_NOT_FOUND

    @_system_fn
    def nvmlDeviceGetHandleByUUID(self, uuid, out):
        wanted = _value(uuid).decode()
        for dev in self.fake.devices:
            if dev.uuid == wanted:
                return self._set_handle(out, dev)
        return pynvml.NVML_ERROR_NOT_FOUND

    # -- device facts ---------------------------------------------------
    @_device_fn
    def nvmlDeviceGetIndex(self, dev, out):
        _out(out).value = dev.index
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetName(self, dev, buf, size):
        return _put_string(buf, dev.profile.name, size)

    @_device_fn
    def nvmlDeviceGetUUID(self, dev, buf, size):
        return _put_string(buf, dev.uuid, size)

    @_device_fn
    def nvmlDeviceGetSerial(self, dev, buf, size):
        return _put_string(buf, dev.serial, size)

    @_device_fn
    def nvmlDeviceGetArchitecture(self, dev, out):
        _out(out).value = dev.profile.arch
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetMemoryInfo(self, dev, out):
        mem = _out(out)
        p, m = dev.profile, dev.metrics
        mem.total = p.memory_mib * MIB
        mem.used = (m.memory_used_mib + p.reserved_mib) * MIB
        mem.free = mem.total - mem.used
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetMemoryInfo_v2(self, dev, out):
        mem = _out(out)
        if mem.version != pynvml.nvmlMemory_v2:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        p, m = dev.profile, dev.metrics
        mem.total = p.memory_mib * MIB
        mem.reserved = p.reserved_mib * MIB
        mem.used = m.memory_used_mib * MIB
        mem.free = mem.total - mem.reserved - mem.used
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPciInfo_v3(self, dev, out):
        info = _out(out)
        domain, bus, device, _fn = dev.pci
        info.busIdLegacy = ('%04X:%02X:%02X.%X' % dev.pci).encode()
        info.busId = dev.bus_id.encode()
        info.domain, info.bus, info.device = domain, bus, device
        info.pciDeviceId = dev.profile.pci_device_id
        info.pciSubSystemId = dev.profile.pci_subsystem_id
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetCudaComputeCapability(self, dev, major, minor):
        _out(major).value, _out(minor).value = dev.profile.cuda_cc
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetMigMode(self, dev, current, pending):
        if not dev.profile.mig_capable:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        _out(current).value = dev.mig_current
        _out(pending).value = dev.mig_pending
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetTemperatureThreshold(self, dev, which, out):
        p = dev.profile
        value = {
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: p.shutdown_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: p.slowdown_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: p.gpu_max_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: p.mem_max_c,
        }.get(_value(which))
        if value is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        _out(out).value = value
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPowerManagementLimit(self, dev, out):
        _out(out).value = dev.power_limit_mw()
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetEnforcedPowerLimit(self, dev, out):
        _out(out).value = dev.power_limit_mw()
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPowerManagementDefaultLimit(self, dev, out):
        _out(out).value = dev.profile.power_default_limit_mw
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPowerManagementLimitConstraints(self, dev, lo, hi):
        _out(lo).value = dev.profile.power_min_limit_mw
        _out(hi).value = dev.profile.power_max_limit_mw
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetMaxClockInfo(self, dev, clock, out):
        value = {pynvml.NVML_CLOCK_GRAPHICS: dev.profile.max_sm_clock,
                 pynvml.NVML_CLOCK_SM: dev.profile.max_sm_clock,
                 pynvml.NVML_CLOCK_MEM: dev.profile.max_mem_clock,
                 pynvml.NVML_CLOCK_VIDEO: 1950}.get(_value(clock))
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = value
        return pynvml.NVML_SUCCESS

    # -- vGPU -------------------------------------------------------------
    def _vgpu_type(self, type_id):
        type_id = _value(type_id)
        for dev in self.fake.devices:
            for t in dev.profile.vgpu_types:
                if t.type_id == type_id:
                    return t
        return None

    @staticmethod
    def _fill_array(count, array, values):
        count = _out(count)
        needed = len(values)
        if array is None:
            count.value = needed
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if needed
                    else pynvml.NVML_SUCCESS)
        if count.value < needed:
            count.value = needed
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        array = _out(array)
        for i, v in enumerate(values):
            array[i] = v
        count.value = needed
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetSupportedVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [t.type_id for t in dev.profile.vgpu_types])

    @_device_fn
    def nvmlDeviceGetCreatableVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [t.type_id for t in dev.profile.vgpu_types])

    @_device_fn
    def nvmlDeviceGetActiveVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [v[0] for v in dev.active_vgpus])

    @_device_fn
    def nvmlDeviceGetVgpuUtilization(self, dev, timestamp, value_type,
                                     count, samples):
        _out(value_type).value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        count = _out(count)
        needed = len(dev.active_vgpus)
        if samples is None or count.value < needed:
            count.value = needed
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if needed
                    else pynvml.NVML_SUCCESS)
        now_us = int(time.time() * 1e6)
        for i, (inst, _type, sm) in enumerate(dev.active_vgpus):
            s = samples[i]
            s.vgpuInstance = inst
            s.timeStamp = now_us
            s.smUtil.uiVal = sm
            s.memUtil.uiVal = sm // 2
            s.encUtil.uiVal = 0
            s.decUtil.uiVal = 0
        count.value = needed
        return pynvml.NVML_SUCCESS

    def _vgpu_type_fn(name, attr):
        def fn(self, type_id, *args):
            self.fake.calls[name] += 1
            if not self.fake.initialized:
                return pynvml.NVML_ERROR_UNINITIALIZED
            t = self._vgpu_type(type_id)
            if t is None:
                return pynvml.NVML_ERROR_INVALID_ARGUMENT
            return attr(t, *args)
        fn.__name__ = name
        return fn

    nvmlVgpuTypeGetName = _vgpu_type_fn(
        'nvmlVgpuTypeGetName', lambda t, buf, size: _put_string(
            buf, t.name, size))
    nvmlVgpuTypeGetClass = _vgpu_type_fn(
        'nvmlVgpuTypeGetClass', lambda t, buf, size: _put_string(
            buf, t.vgpu_class, size))

    def _fb(t, out):
        _out(out).value = t.framebuffer_mib * MIB
        return pynvml.NVML_SUCCESS

    nvmlVgpuTypeGetFramebufferSize = _vgpu_type_fn(
        'nvmlVgpuTypeGetFramebufferSize', _fb)
    del _fb

    @_device_fn
    def nvmlVgpuTypeGetMaxInstances(self, dev, type_id, out):
        type_id = _value(type_id)
        for t in dev.profile.vgpu_types:
            if t.type_id == type_id:
                _out(out).value = t.max_instances
                return pynvml.NVML_SUCCESS
        return pynvml.NVML_ERROR_INVALID_ARGUMENT

    def _instance(self, inst):
        inst = _value(inst)
        for dev in self.fake.devices:
            for v in dev.active_vgpus:
                if v[0] == inst:
                    return dev, v
        return None, None

    def nvmlVgpuInstanceGetType(self, inst, out):
        self.fake.calls['nvmlVgpuInstanceGetType'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        _out(out).value = v[1]
        return pynvml.NVML_SUCCESS

    def nvmlVgpuInstanceGetUUID(self, inst, buf, size):
        self.fake.calls['nvmlVgpuInstanceGetUUID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        return _put_string(buf, str(uuidlib.UUID(int=v[0])), size)

    def nvmlVgpuInstanceGetMdevUUID(self, inst, buf, size):
        self.fake.calls['nvmlVgpuInstanceGetMdevUUID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        mdev = dev.vgpu_vms.get(v[0], (None, None))[0]
        if mdev is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        return _put_string(buf, mdev, size)

    def nvmlVgpuInstanceGetVmID(self, inst, buf, size, id_type):
        self.fake.calls['nvmlVgpuInstanceGetVmID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        vm = dev.vgpu_vms.get(v[0], (None, None))[1]
        if vm is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        _out(id_type).value = pynvml.NVML_VGPU_VM_ID_UUID
        return _put_string(buf, vm, size)

    del _vgpu_type_fn

    # -- metrics ----------------------------------------------------------
    @_device_fn
    def nvmlDeviceGetUtilizationRates(self, dev, out):
        util = _out(out)
        util.gpu = dev.metrics.gpu_util
        util.memory = dev.metrics.mem_util
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetTemperature(self, dev, sensor, out):
        if _value(sensor) != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = dev.metrics.temperature_c
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetTemperatureV(self, dev, out):
        temp = _out(out)
        if temp.version != pynvml.nvmlTemperature_v1:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        if temp.sensorType != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        temp.temperature = dev.metrics.temperature_c
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPowerUsage(self, dev, out):
        _out(out).value = dev.power_mw()
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetTotalEnergyConsumption(self, dev, out):
        _out(out).value = dev.energy_mj()
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetClockInfo(self, dev, clock, out):
        m = dev.metrics
        value = {pynvml.NVML_CLOCK_GRAPHICS: m.graphics_clock_mhz,
                 pynvml.NVML_CLOCK_SM: m.sm_clock_mhz,
                 pynvml.NVML_CLOCK_MEM: (m.mem_clock_mhz
                                         or dev.profile.max_mem_clock),
                 pynvml.NVML_CLOCK_VIDEO: m.video_clock_mhz}.get(_value(clock))
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = value
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetCurrentClocksEventReasons(self, dev, out):
        _out(out).value = dev.metrics.clocks_event_reasons
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, dev, out):
        _out(out).value = dev.metrics.clocks_event_reasons
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPerformanceState(self, dev, out):
        _out(out).value = dev.metrics.pstate
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetFanSpeed(self, dev, out):
        _out(out).value = dev.metrics.fan_pct
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPcieThroughput(self, dev, counter, out):
        counter = _value(counter)
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            _out(out).value = dev.metrics.pcie_tx_kbps
        elif counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            _out(out).value = dev.metrics.pcie_rx_kbps
        else:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetPcieReplayCounter(self, dev, out):
        _out(out).value = dev.metrics.pcie_replay
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetEncoderUtilization(self, dev, util, period):
        _out(util).value = dev.metrics.enc_util
        _out(period).value = 167000
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetDecoderUtilization(self, dev, util, period):
        _out(util).value = dev.metrics.dec_util
        _out(period).value = 167000
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetTotalEccErrors(self, dev, error_type, counter, out):
        m = dev.metrics
        key = (_value(error_type), _value(counter))
        value = {
            (0, 0): m.ecc_sbe_volatile, (1, 0): m.ecc_dbe_volatile,
            (0, 1): m.ecc_sbe_aggregate, (1, 1): m.ecc_dbe_aggregate,
        }.get(key)
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        _out(out).value = value
        return pynvml.NVML_SUCCESS

    def _retired(self, dev, cause, count, pages, times):
        n = (dev.metrics.retired_sbe_pages if _value(cause) == 0
             else dev.metrics.retired_dbe_pages)
        count = _out(count)
        if pages is None or count.value < n:
            count.value = n
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if n
                    else pynvml.NVML_SUCCESS)
        for i in range(n):
            pages[i] = 0x1000 * (i + 1) + _value(cause)
            if times is not None:
                times[i] = 1764400000 + i
        count.value = n
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetRetiredPages(self, dev, cause, count, pages):
        return self._retired(dev, cause, count, pages, None)

    @_device_fn
    def nvmlDeviceGetRetiredPages_v2(self, dev, cause, count, pages,
                                     times=None):
        return self._retired(dev, cause, count, pages, times)

    @_device_fn
    def nvmlDeviceGetRetiredPagesPendingStatus(self, dev, out):
        _out(out).value = int(bool(dev.metrics.retired_pending))
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetRemappedRows(self, dev, corr, unc, pending, failure):
        m = dev.metrics
        _out(corr).value = m.remapped_cor
        _out(unc).value = m.remapped_unc
        _out(pending).value = m.remap_pending
        _out(failure).value = m.remap_failure
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceGetFieldValues(self, dev, count, values):
        values = _out(values)
        now_us = int(time.time() * 1e6)
        for i in range(_value(count)):
            v = values[i]
            fid = v.fieldId
            v.timestamp = now_us
            v.latencyUsec = 0
            code = dev.field_errors.get(fid)
            spec = _FIELD_VALUES.get(fid)
            if code is None and spec is None:
                code = pynvml.NVML_ERROR_NOT_SUPPORTED
            if code is not None:
                v.nvmlReturn = code
                continue
            vtype, getter = spec
            v.nvmlReturn = pynvml.NVML_SUCCESS
            v.valueType = vtype
            setattr(v.value, _VALUE_ATTR[vtype], int(getter(dev)))
        return pynvml.NVML_SUCCESS

    # -- events -------------------------------------------------------------
    @_device_fn
    def nvmlDeviceGetSupportedEventTypes(self, dev, out):
        _out(out).value = _SUPPORTED_EVENTS
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlEventSetCreate(self, out):
        es = _EventSet()
        self.fake.event_sets[ctypes.addressof(es.struct)] = es
        _out(out).contents = es.struct
        return pynvml.NVML_SUCCESS

    @_device_fn
    def nvmlDeviceRegisterEvents(self, dev, types, event_set):
        es = self.fake.event_set(event_set)
        if es is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        mask = _value(types)
        if mask & ~_SUPPORTED_EVENTS:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        es.registered[dev.index] = es.registered.get(dev.index, 0) | mask
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlEventSetWait_v2(self, event_set, data, timeout_ms):
        es = self.fake.event_set(event_set)
        if es is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        try:
            dev, etype, edata = es.queue.get(
                timeout=max(_value(timeout_ms), 0) / 1000.0)
        except queue.Empty:
            return pynvml.NVML_ERROR_TIMEOUT
        out = _out(data)
        out.device = dev.handle
        out.eventType = etype
        out.eventData = edata
        out.gpuInstanceId = 0xFFFFFFFF
        out.computeInstanceId = 0xFFFFFFFF
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlEventSetFree(self, event_set):
        key = ctypes.addressof(event_set.contents) if event_set else None
        if self.fake.event_sets.pop(key, None) is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return pynvml.NVML_SUCCESS

    @_system_fn
    def nvmlErrorString(self, code):
        return None


class FakeNvml(fixtures.Fixture):
    """Install a fake ``libnvidia-ml`` under the real ``pynvml``."""

    def __init__(self, gpus=('A100_80GB_PCIE',), driver_version='550.54.15',
                 cuda_driver_version=12040, library=True, init_error=None):
        super().__init__()
        self._specs = [g if isinstance(g, DeviceSpec) else DeviceSpec(g)
                       for g in gpus]
        self.driver_version = driver_version
        self.cuda_driver_version = cuda_driver_version
        self.library = library
        self.init_error = init_error
        self.init_count = 0
        self.calls: collections.Counter = collections.Counter()
        self.devices: list[FakeDevice] = []
        self.event_sets: dict[int, _EventSet] = {}
        self._by_address: dict[int, FakeDevice] = {}
        self._lock = threading.Lock()
        self.lib: FakeNvmlLibrary | None = None

    def _setUp(self):
        self.devices = [FakeDevice(i, spec)
                        for i, spec in enumerate(self._specs)]
        self._by_address = {ctypes.addressof(d._struct): d
                            for d in self.devices}
        self.lib = FakeNvmlLibrary(self) if self.library else None
        saved_lib = pynvml.nvmlLib
        saved_cache = dict(pynvml._nvmlGetFunctionPointer_cache)
        saved_refcount = pynvml._nvmlLib_refcount

        def restore():
            pynvml.nvmlLib = saved_lib
            pynvml._nvmlGetFunctionPointer_cache.clear()
            pynvml._nvmlGetFunctionPointer_cache.update(saved_cache)
            pynvml._nvmlLib_refcount = saved_refcount

        self.addCleanup(restore)
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml.nvmlLib = self.lib
        pynvml._nvmlLib_refcount = 0

    # -- lookups used by the fake library -------------------------------
    @property
    def initialized(self) -> bool:
        return self.init_count > 0

    def device_by_handle(self, handle) -> FakeDevice | None:
        try:
            return self._by_address.get(ctypes.addressof(handle.contents))
        except (ValueError, AttributeError, TypeError):
            return None

    def event_set(self, event_set) -> _EventSet | None:
        try:
            return self.event_sets.get(ctypes.addressof(event_set.contents))
        except (ValueError, AttributeError, TypeError):
            return None

    # -- test controls ----------------------------------------------------
    def device(self, gpu) -> FakeDevice:
        """A device by index, PCI address (any spelling), UUID or itself."""
        if isinstance(gpu, FakeDevice):
            return gpu
        if isinstance(gpu, int):
            return self.devices[gpu]
        for dev in self.devices:
            if dev.uuid == gpu:
                return dev
        wanted = parse_pci(gpu)
        for dev in self.devices:
            if dev.pci == wanted:
                return dev
        raise KeyError('no fake GPU %r' % (gpu,))

    def set_metrics(self, gpu, **values) -> None:
        dev = self.device(gpu)
        for key, value in values.items():
            _set_metric(dev.metrics, key, value)

    def set_error(self, gpu, function: str, code: int | None) -> None:
        """Make a C function return ``code`` on a device (None: clear)."""
        dev = self.device(gpu)
        if code is None:
            dev.errors.pop(function, None)
        else:
            dev.errors[function] = code

    def set_field_error(self, gpu, field_id: int, code: int | None) -> None:
        dev = self.device(gpu)
        if code is None:
            dev.field_errors.pop(field_id, None)
        else:
            dev.field_errors[field_id] = code

    def set_mig_mode(self, gpu, current: bool, pending: bool | None = None):
        dev = self.device(gpu)
        dev.mig_current = int(current)
        dev.mig_pending = int(current if pending is None else pending)

    def lose(self, gpu, lost: bool = True) -> None:
        """GPU fallen off the bus: every call returns GPU_IS_LOST."""
        self.device(gpu).lost = lost

    def set_active_vgpus(self, gpu, vgpus) -> None:
        """``vgpus``: ``[(type_id, sm_util_pct), ...]`` running now.

        An entry may add ``mdev_uuid, vm_uuid``: what
        ``nvmlVgpuInstanceGetMdevUUID`` and ``nvmlVgpuInstanceGetVmID``
        answer for it (on KVM the VM ID is the domain's UUID); without
        them they answer NOT_SUPPORTED / NOT_FOUND.
        """
        dev = self.device(gpu)
        base = (dev.index + 1) * 1000
        dev.active_vgpus = [(base + i, v[0], v[1])
                            for i, v in enumerate(vgpus)]
        dev.vgpu_vms = {base + i: (v[2], v[3]) for i, v in enumerate(vgpus)
                        if len(v) == 4}

    def inject_event(self, gpu, event_type: int, data: int = 0) -> int:
        """Deliver an event to registered event sets; returns how many."""
        dev = self.device(gpu)
        delivered = 0
        for es in list(self.event_sets.values()):
            if es.registered.get(dev.index, 0) & event_type:
                es.queue.put((dev, event_type, data))
                delivered += 1
        return delivered

    def inject_xid(self, gpu, xid: int) -> int:
        dev = self.device(gpu)
        dev.xids.append(xid)
        return self.inject_event(
            dev, pynvml.nvmlEventTypeXidCriticalError, xid)
