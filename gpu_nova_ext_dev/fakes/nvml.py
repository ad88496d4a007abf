# SPDX-License-Identifier: Apache-2.0

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

    from gpu_nova_ext_dev.fakes import nvml as fake_nvml

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
* Topology: a DeviceSpec's ``nvlinks`` (the remote PCI address of each
  active NVLink, a GPU or an NVSwitch), ``numa_node``, ``pci_switch`` and
  ``root_port`` drive ``nvmlDeviceGetNvLinkState`` /
  ``nvmlDeviceGetNvLinkRemotePciInfo_v2`` /
  ``nvmlDeviceGetNvLinkRemoteDeviceType`` and
  ``nvmlDeviceGetTopologyCommonAncestor``; a profile's ``nvlinks`` is its
  NVLink port count (0: NotSupported, as on L4, T4, L40S; a link past
  the last: InvalidArgument).  Whole boards (HGX 8-GPU, PCIe pairs with
  NVLink bridges, L40S) are :mod:`gpu_nova_ext_dev.fakes.topology`'s
  ``LAYOUTS``: ``FakeNvml(LAYOUTS['HGX_H100_8GPU'].device_specs())``.
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
* MIG (``nvml_mig``): ``fake.set_mig_mode(gpu, current, pending)``,
  ``fake.block_mig_activation(gpu, code)`` (a mode change then stays
  pending: ``NVML_ERROR_IN_USE`` or ``NVML_ERROR_RESET_REQUIRED``),
  ``fake.reset_gpu(gpu)`` (the pending mode becomes current, instances
  are gone), ``fake.use_gpu_instance(gpu, gi_id)`` (destroy answers
  IN_USE), ``fake.gpu_instances(gpu)``.
* ``fake.restart_driver()``: what a driver reload does: power limits back
  to their defaults, GPU instances gone, pending MIG modes current.

Tests must run under the fixture only: ``pynvml.nvmlLib`` is process
global, so two FakeNvml fixtures must not be active at once.

The fake is split by job: ``nvml_boards`` (board models, vGPU types, a
device's state), ``nvml_abi`` (ctypes argument helpers, call rules, field
values, event sets), ``nvml_info`` and ``nvml_metrics`` (the C functions);
this module assembles the library and holds the fixture.

The fixture is not thread-safe against concurrent ``set_*`` calls, but
event delivery uses a ``queue.Queue`` so a sampler thread may wait on an
event set while the test injects.
"""
import collections
import ctypes
import threading

import fixtures
import pynvml

from gpu_nova_ext_dev.fakes import nvml_abi as abi
from gpu_nova_ext_dev.fakes import nvml_boards as boards
from gpu_nova_ext_dev.fakes import nvml_info
from gpu_nova_ext_dev.fakes import nvml_metrics
from gpu_nova_ext_dev.fakes import nvml_mig

# the names tests and tools use, as before the split
MIB = boards.MIB
DEFAULT_PCI_ADDRESSES = boards.DEFAULT_PCI_ADDRESSES
PROFILES = boards.PROFILES
DeviceSpec = boards.DeviceSpec
FakeDevice = boards.FakeDevice
GpuProfile = boards.GpuProfile
Metrics = boards.Metrics
VgpuType = boards.VgpuType
parse_pci = boards.parse_pci


class FakeNvmlLibrary(nvml_info.InfoCalls,
                      nvml_metrics.MetricCalls,
                      nvml_mig.MigCalls):
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
        self.event_sets: dict[int, abi.EventSet] = {}
        self._by_address: dict[int, FakeDevice] = {}
        self._gpu_instances: dict[int, nvml_mig.GpuInstance] = {}
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

    def gpu_instance_by_handle(self, handle):
        try:
            return self._gpu_instances.get(
                ctypes.addressof(handle.contents))
        except (ValueError, AttributeError, TypeError):
            return None

    def register_gpu_instance(self, gi) -> None:
        self._gpu_instances[ctypes.addressof(gi.struct)] = gi

    def unregister_gpu_instance(self, gi) -> None:
        self._gpu_instances.pop(ctypes.addressof(gi.struct), None)

    def event_set(self, event_set) -> abi.EventSet | None:
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
            boards.set_metric(dev.metrics, key, value)

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

    def block_mig_activation(self, gpu, code: int | None) -> None:
        """Keep MIG mode changes pending (IN_USE, RESET_REQUIRED)."""
        self.device(gpu).mig_activation_blocker = code

    def reset_gpu(self, gpu) -> None:
        """A GPU reset: the pending MIG mode becomes current."""
        dev = self.device(gpu)
        for gi in list(dev.gpu_instances.values()):
            self.unregister_gpu_instance(gi)
        dev.gpu_instances.clear()
        dev.mig_current = dev.mig_pending
        dev.mig_activation_blocker = None

    def restart_driver(self) -> None:
        """A driver reload: limits back to defaults, GPUs reset."""
        for dev in self.devices:
            dev.metrics.power_limit_mw = None
            self.reset_gpu(dev)

    def gpu_instances(self, gpu) -> list:
        """``(profile name, start)`` of a GPU's instances, by start."""
        return sorted((gi.profile.name, gi.start) for gi in
                      self.device(gpu).gpu_instances.values())

    def use_gpu_instance(self, gpu, gi_id: int, used: bool = True):
        self.device(gpu).gpu_instances[gi_id].in_use = used

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
