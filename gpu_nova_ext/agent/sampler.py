# SPDX-License-Identifier: Apache-2.0

"""NVML metrics sampler: every GPU read once per ``metrics_interval``.

Each GPU is read through a list of *readers* (one NVML call or one batched
``nvmlDeviceGetFieldValues`` call each).  A reader whose call answers
NotSupported or NoPermission is dropped for that GPU (or replaced by its
older NVML equivalent) and never retried, so a board without a fan or
without page retirement costs nothing per sample.  Counters that NVML
offers as field values (ECC, retired pages, remapped rows, memory
temperature, PCIe replays, energy) come in one call; a field that is not
supported is dropped from that call.  XID events are drained from an NVML
event set at each sample.  A GPU whose calls answer GPU_IS_LOST is reported
``lost``; the others keep being sampled.
"""
import ctypes
import dataclasses
import time
from typing import Any, Callable

from oslo_log import log as logging

from gpu_nova_ext.agent import nvml_readers
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

MIB = nvml_readers.MIB
STATIC_REFRESH_S = 60.0


def _import_pynvml():
    import pynvml
    return pynvml


@dataclasses.dataclass
class GpuSample:
    """What one sample read from one GPU."""

    index: int
    pci_address: str
    bus_id: str                     # NVML spelling, 00000000:3B:00.0
    uuid: str | None
    name: str | None
    timestamp: float
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    xids: list[int] = dataclasses.field(default_factory=list)
    lost: bool = False
    errors: dict[str, str] = dataclasses.field(default_factory=dict)
    vgpus: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    vendor: str = 'nvidia'
    #: the exporter's ``device`` label (``nvidia0``, ``card1``); None is
    #: ``nvidia<index>``
    device: str | None = None
    #: Nova instance UUID of the server using the GPU (passthrough), and
    #: per vGPU entry under ``instance_uuid``; filled by attribution
    instance_uuid: str | None = None


class _Device:
    def __init__(self, index, handle, pci_address, bus_id, uuid, name):
        self.index = index
        self.handle = handle
        self.pci_address = pci_address
        self.bus_id = bus_id
        self.uuid = uuid
        self.name = name
        self.readers: list[tuple[str, list[Callable]]] = []
        self.fields: list[tuple[int, str, float]] = []
        self.unsupported: dict[str, str] = {}
        self.static: dict[str, Any] = {}
        self.static_at = -STATIC_REFRESH_S
        self.xid_count = 0
        self.xid_last = 0
        self.vgpu_types: dict[int, str] = {}
        # vGPU instance -> (mdev UUID, VM ID): the server it belongs to
        self.vgpu_vms: dict[int, tuple[str | None, str | None]] = {}
        self.vgpu_ts = 0


class NvmlSampler:
    """Reads metrics, XIDs and vGPU utilization of every NVIDIA GPU.

    ``open()`` initializes NVML and finds the GPUs (raises the real
    ``pynvml.NVMLError`` subclasses when NVML is missing or the driver is
    not loaded); ``sample()`` returns one :class:`GpuSample` per GPU;
    ``close()`` frees the event set and shuts NVML down.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic):
        self._clock = clock
        self._nvml = None
        self._devices: list[_Device] = []
        self._by_handle: dict[int, _Device] = {}
        self._event_set = None

    @property
    def devices(self) -> list[_Device]:
        return list(self._devices)

    def unsupported(self) -> dict[str, dict[str, str]]:
        """What each GPU (by PCI address) does not support, and why."""
        return {d.pci_address: dict(d.unsupported) for d in self._devices}

    # -- lifecycle ----------------------------------------------------------
    def open(self) -> None:
        nvml = self._nvml = _import_pynvml()
        nvml.nvmlInit()
        self._devices = []
        for index in range(nvml.nvmlDeviceGetCount()):
            try:
                dev = self._open_device(nvml, index)
            except (nvml.NVMLError, ValueError) as exc:
                LOG.warning('NVML GPU index %(index)d cannot be opened, it '
                            'is not sampled: %(error)s',
                            {'index': index, 'error': exc})
                continue
            self._devices.append(dev)
        self._by_handle = {_address(d.handle): d for d in self._devices}
        self._open_events(nvml)

    def _open_device(self, nvml, index) -> _Device:
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        bus_id = nvml.nvmlDeviceGetPciInfo(handle).busId
        if isinstance(bus_id, bytes):
            bus_id = bus_id.decode()
        dev = _Device(index, handle, naming.normalize_pci_address(bus_id),
                      bus_id, nvml.nvmlDeviceGetUUID(handle),
                      nvml.nvmlDeviceGetName(handle))
        dev.readers = [(name, list(alternatives))
                       for name, alternatives in nvml_readers.readers(nvml)]
        dev.fields = list(nvml_readers.fields(nvml))
        return dev

    def _open_events(self, nvml) -> None:
        try:
            self._event_set = nvml.nvmlEventSetCreate()
        except nvml.NVMLError as exc:
            LOG.warning('NVML event sets are not available, XID events are '
                        'not watched: %s', exc)
            return
        for dev in self._devices:
            try:
                nvml.nvmlDeviceRegisterEvents(
                    dev.handle, nvml.nvmlEventTypeXidCriticalError,
                    self._event_set)
            except nvml.NVMLError as exc:
                dev.unsupported['xid_events'] = str(exc)
                LOG.warning('XID events of GPU %(gpu)s cannot be watched: '
                            '%(error)s', {'gpu': dev.pci_address,
                                          'error': exc})

    def close(self) -> None:
        nvml = self._nvml
        if nvml is None:
            return
        if self._event_set is not None:
            try:
                nvml.nvmlEventSetFree(self._event_set)
            except nvml.NVMLError:
                pass
            self._event_set = None
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
        self._nvml = None
        self._devices = []

    # -- sampling -------------------------------------------------------------
    def sample(self) -> list[GpuSample]:
        nvml = self._nvml
        if nvml is None:
            return []
        now = self._clock()
        wall = time.time()
        xids = self._drain_events(nvml)
        samples = []
        for dev in self._devices:
            sample = GpuSample(dev.index, dev.pci_address, dev.bus_id,
                               dev.uuid, dev.name, wall)
            for xid in xids.get(dev.index, ()):
                sample.xids.append(xid)
                dev.xid_count += 1
                dev.xid_last = xid
            try:
                self._read(nvml, dev, sample, now)
            except nvml.NVMLError_GpuIsLost:
                sample.lost = True
            samples.append(sample)
        return samples

    def _read(self, nvml, dev, sample, now) -> None:
        metrics = sample.metrics
        if now - dev.static_at >= STATIC_REFRESH_S:
            self._read_static(nvml, dev, sample)
            dev.static_at = now
        metrics.update(dev.static)
        keep = []
        for name, alternatives in dev.readers:
            while alternatives:
                try:
                    metrics.update(alternatives[0](nvml, dev.handle))
                    break
                except (nvml.NVMLError_NotSupported,
                        nvml.NVMLError_NoPermission,
                        nvml.NVMLError_FunctionNotFound,
                        nvml.NVMLError_ArgumentVersionMismatch) as exc:
                    alternatives.pop(0)
                    if not alternatives:
                        dev.unsupported[name] = str(exc)
                        LOG.debug('GPU %(gpu)s: %(field)s not read any '
                                  'more: %(error)s',
                                  {'gpu': dev.pci_address, 'field': name,
                                   'error': exc})
                except nvml.NVMLError_GpuIsLost:
                    raise
                except nvml.NVMLError as exc:
                    sample.errors[name] = str(exc)
                    break
            if alternatives:
                keep.append((name, alternatives))
        dev.readers = keep
        if dev.fields:
            self._read_fields(nvml, dev, sample)
        if dev.xid_count:
            metrics['xid_count'] = dev.xid_count
            metrics['xid_last'] = dev.xid_last
        if 'vgpu' not in dev.unsupported:
            self._read_vgpus(nvml, dev, sample)

    def _read_static(self, nvml, dev, sample) -> None:
        static = dev.static
        for key, call in (
                ('slowdown_temperature_c', lambda h: (
                    nvml.nvmlDeviceGetTemperatureThreshold(
                        h, nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN))),
                ('shutdown_temperature_c', lambda h: (
                    nvml.nvmlDeviceGetTemperatureThreshold(
                        h, nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN))),
                ('power_limit_w', lambda h: (
                    nvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0)),
                ('memory_total_mib', lambda h: (
                    nvml.nvmlDeviceGetMemoryInfo(h).total // MIB))):
            if key in dev.unsupported:
                continue
            try:
                static[key] = call(dev.handle)
            except nvml.NVMLError_GpuIsLost:
                raise
            except (nvml.NVMLError_NotSupported,
                    nvml.NVMLError_NoPermission) as exc:
                dev.unsupported[key] = str(exc)
            except nvml.NVMLError as exc:
                sample.errors[key] = str(exc)

    def _read_fields(self, nvml, dev, sample) -> None:
        try:
            values = nvml.nvmlDeviceGetFieldValues(
                dev.handle, [f[0] for f in dev.fields])
        except nvml.NVMLError_GpuIsLost:
            raise
        except (nvml.NVMLError_NotSupported,
                nvml.NVMLError_FunctionNotFound) as exc:
            for _fid, key, _scale in dev.fields:
                dev.unsupported[key] = str(exc)
            dev.fields = []
            return
        except nvml.NVMLError as exc:
            sample.errors['field_values'] = str(exc)
            return
        keep = []
        metrics = sample.metrics
        for field, value in zip(dev.fields, values):
            fid, key, scale = field
            ret = value.nvmlReturn
            if ret == nvml.NVML_SUCCESS:
                metrics[key] = nvml_readers.field_value(value) * scale
                keep.append(field)
            elif ret == nvml.NVML_ERROR_GPU_IS_LOST:
                raise nvml.NVMLError(ret)
            elif ret in (nvml.NVML_ERROR_NOT_SUPPORTED,
                         nvml.NVML_ERROR_NO_PERMISSION):
                dev.unsupported[key] = str(nvml.NVMLError(ret))
            else:
                sample.errors[key] = str(nvml.NVMLError(ret))
                keep.append(field)
        dev.fields = keep

    def _read_vgpus(self, nvml, dev, sample) -> None:
        try:
            instances = nvml.nvmlDeviceGetActiveVgpus(dev.handle)
        except nvml.NVMLError_GpuIsLost:
            raise
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission,
                nvml.NVMLError_FunctionNotFound) as exc:
            dev.unsupported['vgpu'] = str(exc)
            return
        except nvml.NVMLError as exc:
            sample.errors['vgpu'] = str(exc)
            return
        sample.metrics['vgpu_instances'] = len(instances)
        if not instances:
            return
        util = {}
        if 'vgpu_utilization' not in dev.unsupported:
            try:
                for s in nvml.nvmlDeviceGetVgpuUtilization(dev.handle,
                                                           dev.vgpu_ts):
                    util[s.vgpuInstance] = s
                    dev.vgpu_ts = max(dev.vgpu_ts, s.timeStamp)
            except nvml.NVMLError_GpuIsLost:
                raise
            except (nvml.NVMLError_NotSupported,
                    nvml.NVMLError_NoPermission) as exc:
                dev.unsupported['vgpu_utilization'] = str(exc)
            except nvml.NVMLError as exc:
                sample.errors['vgpu_utilization'] = str(exc)
        total = 0.0
        for inst in instances:
            type_name = dev.vgpu_types.get(inst)
            if type_name is None:
                try:
                    type_name = nvml.nvmlVgpuTypeGetName(
                        nvml.nvmlVgpuInstanceGetType(inst))
                except nvml.NVMLError:
                    type_name = ''
                dev.vgpu_types[inst] = type_name
            if inst not in dev.vgpu_vms:
                dev.vgpu_vms[inst] = _vgpu_vm(nvml, inst)
            mdev_uuid, vm_id = dev.vgpu_vms[inst]
            entry = {'instance': int(inst), 'type': type_name,
                     'mdev_uuid': mdev_uuid, 'vm_id': vm_id}
            s = util.get(inst)
            if s is not None:
                entry['sm_util_pct'] = s.smUtil.uiVal
                entry['mem_util_pct'] = s.memUtil.uiVal
                entry['enc_util_pct'] = s.encUtil.uiVal
                entry['dec_util_pct'] = s.decUtil.uiVal
                total += s.smUtil.uiVal
            sample.vgpus.append(entry)
        if util:
            sample.metrics['vgpu_sm_util_pct_mean'] = total / len(instances)

    def _drain_events(self, nvml) -> dict[int, list[int]]:
        xids: dict[int, list[int]] = {}
        if self._event_set is None:
            return xids
        while True:
            try:
                data = nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except nvml.NVMLError_Timeout:
                return xids
            except nvml.NVMLError as exc:
                LOG.debug('NVML event wait failed: %s', exc)
                return xids
            if data.eventType != nvml.nvmlEventTypeXidCriticalError:
                continue
            dev = self._by_handle.get(_address(data.device))
            if dev is None:
                try:
                    uuid = nvml.nvmlDeviceGetUUID(data.device)
                except nvml.NVMLError:
                    uuid = None
                dev = next((d for d in self._devices if d.uuid == uuid),
                           None)
            if dev is None:
                LOG.warning('XID %d on an unknown GPU', data.eventData)
                continue
            LOG.warning('GPU %(gpu)s reported XID %(xid)d',
                        {'gpu': dev.pci_address, 'xid': data.eventData})
            xids.setdefault(dev.index, []).append(int(data.eventData))


def _vgpu_vm(nvml, inst) -> tuple[str | None, str | None]:
    """(mdev UUID, VM ID) of a vGPU instance; None where NVML has none.

    On KVM the VM ID is the domain's UUID, which Nova makes the instance
    UUID; the mdev UUID is the one in the domain's ``<hostdev>``.
    """
    out = []
    for call in (lambda: nvml.nvmlVgpuInstanceGetMdevUUID(inst),
                 lambda: nvml.nvmlVgpuInstanceGetVmID(inst)[0]):
        try:
            value = call()
        except (nvml.NVMLError, AttributeError):
            value = None
        if isinstance(value, bytes):
            value = value.decode(errors='replace')
        out.append(value or None)
    return out[0], out[1]


def _address(handle) -> int | None:
    return ctypes.cast(handle, ctypes.c_void_p).value
