# SPDX-License-Identifier: Apache-2.0

"""The ``nvml`` inventory source: NVIDIA facts through nvidia-ml-py.

Name, UUID, serial, memory, PCI bus id (normalized to ``0000:3b:00.0``),
driver and CUDA driver versions, compute capability, MIG current/pending
mode, the supported vGPU types (framebuffer, maximum instances per GPU),
slowdown/shutdown temperature thresholds, the enforced power limit and
the NVLink peers (remote PCI address -> active links; design doc:
Topology).

Each field is read on its own: a field the board does not support
(``NotSupported``), or that this user may not read (``NoPermission``), or
that this driver lacks (``FunctionNotFound``) is left empty silently;
another NVML error leaves it empty with one warning naming the GPU.  A GPU
that NVML reports lost is reported ``unhealthy`` (when its PCI address is
known) or skipped with a warning.  No ``pynvml`` module, no
``libnvidia-ml.so.1`` or no driver loaded means an empty report and one
warning: the inventory goes on without NVML facts.
"""
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

#: health reason of a GPU NVML reports lost
REASON_GPU_LOST = 'gpu_lost'


class _GpuLost(Exception):
    pass


class NvmlSource(base.InventorySource):
    """NVIDIA GPU facts from NVML."""

    name = 'nvml'

    def __init__(self, conf):
        super().__init__(conf)
        self._nvml = None

    def _init(self):
        try:
            import pynvml
        except ImportError as exc:
            reason = 'nvidia-ml-py is not installed (%s)' % exc
        else:
            try:
                pynvml.nvmlInit()
                return pynvml
            except pynvml.NVMLError as exc:
                reason = ('%s: no NVIDIA driver on this host, or it is not '
                          'loaded' % exc)
        # Outside the except block: one line, no traceback in the log.
        self.warn('NVML facts unavailable: %s.', reason)
        return None

    def discover(self) -> dict[str, base.Gpu]:
        nvml = self._init()
        if nvml is None:
            return {}
        self._nvml = nvml
        try:
            return self._discover(nvml)
        finally:
            try:
                nvml.nvmlShutdown()
            except nvml.NVMLError as exc:
                LOG.debug('nvmlShutdown failed: %s', exc)

    def _call(self, label: str, what: str, fn, *args) -> Any:
        """One NVML call; per-field errors become None."""
        nvml = self._nvml
        try:
            return fn(*args)
        except (nvml.NVMLError_NotSupported, nvml.NVMLError_NoPermission,
                nvml.NVMLError_FunctionNotFound) as exc:
            LOG.debug('NVML %s of GPU %s: %s', what, label, exc)
            return None
        except nvml.NVMLError_GpuIsLost:
            raise _GpuLost()
        except nvml.NVMLError as exc:
            self.warn('NVML %s of GPU %s failed: %s; leaving it empty.',
                      what, label, exc)
            return None
        except UnicodeDecodeError as exc:
            self.warn('NVML %s of GPU %s is not valid UTF-8 (%s); leaving '
                      'it empty.', what, label, exc)
            return None

    def _discover(self, nvml) -> dict[str, base.Gpu]:
        label = 'host'
        driver = self._call(label, 'driver version',
                            nvml.nvmlSystemGetDriverVersion)
        cuda = self._call(label, 'CUDA driver version',
                          nvml.nvmlSystemGetCudaDriverVersion)
        cuda_version = ('%d.%d' % (cuda // 1000, (cuda % 1000) // 10)
                        if isinstance(cuda, int) and cuda > 0 else None)
        try:
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as exc:
            self.warn('NVML cannot count GPUs: %s; no NVML facts.', exc)
            return {}
        gpus = {}
        for index in range(count):
            gpu = self._device(nvml, index)
            if gpu is None:
                continue
            gpu.driver_version = driver
            gpu.cuda_driver_version = cuda_version
            gpus[gpu.pci_address] = gpu
        return gpus

    def _device(self, nvml, index: int) -> base.Gpu | None:
        label = 'index %d' % index
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
        except nvml.NVMLError as exc:
            self.warn('Skipping NVML GPU %s: %s.', label, exc)
            return None
        try:
            info = self._call(label, 'PCI info', nvml.nvmlDeviceGetPciInfo,
                              handle)
        except _GpuLost:
            self.warn('Skipping NVML GPU %s: GPU is lost and its PCI '
                      'address is unknown.', label)
            return None
        address = None
        if info is not None:
            bus_id = info.busId
            if isinstance(bus_id, bytes):
                bus_id = bus_id.decode('ascii', 'replace')
            try:
                address = naming.normalize_pci_address(bus_id)
            except ValueError:
                pass
        if address is None:
            self.warn('Skipping NVML GPU %s: no usable PCI bus id.', label)
            return None
        gpu = base.Gpu(pci_address=address, vendor='nvidia',
                       vendor_id='10de', sources=[self.name])
        if info is not None and getattr(info, 'pciDeviceId', 0):
            gpu.product_id = '%04x' % (info.pciDeviceId >> 16)
        try:
            self._facts(nvml, handle, address, gpu)
        except _GpuLost:
            self.warn('NVML reports GPU %s lost.', address)
            gpu.health = base.Health(state='unhealthy',
                                     reasons=[REASON_GPU_LOST])
        return gpu

    def _facts(self, nvml, handle, label: str, gpu: base.Gpu) -> None:
        call = self._call
        name = call(label, 'name', nvml.nvmlDeviceGetName, handle)
        if name:
            gpu.product_name = name
            gpu.model = naming.normalize_model(name) or None
        gpu.uuid = call(label, 'UUID', nvml.nvmlDeviceGetUUID, handle)
        gpu.serial = call(label, 'serial', nvml.nvmlDeviceGetSerial, handle)
        mem = call(label, 'memory', nvml.nvmlDeviceGetMemoryInfo, handle)
        if mem is not None:
            gpu.memory_mib = int(mem.total // (1024 * 1024))
        cc = call(label, 'compute capability',
                  nvml.nvmlDeviceGetCudaComputeCapability, handle)
        if cc:
            gpu.cuda_cc = '%d.%d' % tuple(cc)
        self._mig(nvml, handle, label, gpu)
        slowdown = call(label, 'slowdown temperature',
                        nvml.nvmlDeviceGetTemperatureThreshold, handle,
                        nvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN)
        shutdown = call(label, 'shutdown temperature',
                        nvml.nvmlDeviceGetTemperatureThreshold, handle,
                        nvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN)
        gpu.slowdown_temperature_c = slowdown
        gpu.shutdown_temperature_c = shutdown
        limit = call(label, 'enforced power limit',
                     nvml.nvmlDeviceGetEnforcedPowerLimit, handle)
        if limit is None:
            limit = call(label, 'power limit',
                         nvml.nvmlDeviceGetPowerManagementLimit, handle)
        if limit is not None:
            gpu.power_limit_w = limit / 1000.0
        gpu.vgpu_types = self._vgpu_types(nvml, handle, label)
        gpu.nvlink_peers = self._nvlink_peers(nvml, handle, label)

    def _nvlink_peers(self, nvml, handle, label: str) -> dict[str, int]:
        """Peer PCI address (a GPU or an NVSwitch) -> active NVLinks.

        Links are numbered from 0: the first link the board lacks answers
        ``InvalidArgument`` (or ``NotSupported``: a board without NVLink,
        a PCIe L40S) and ends the walk.  Another NVML error means no links
        for this GPU, with one warning (design doc: Topology).
        """
        peers: dict[str, int] = {}
        quiet = (nvml.NVMLError_NotSupported, nvml.NVMLError_InvalidArgument,
                 nvml.NVMLError_FunctionNotFound,
                 nvml.NVMLError_NoPermission)
        for link in range(nvml.NVML_NVLINK_MAX_LINKS):
            try:
                if (nvml.nvmlDeviceGetNvLinkState(handle, link)
                        != nvml.NVML_FEATURE_ENABLED):
                    continue
                bus_id = nvml.nvmlDeviceGetNvLinkRemotePciInfo(
                    handle, link).busId
            except quiet as exc:
                LOG.debug('NVML NVLink %d of GPU %s: %s', link, label, exc)
                break
            except nvml.NVMLError_GpuIsLost:
                raise _GpuLost()
            except nvml.NVMLError as exc:
                self.warn('NVML NVLink %d of GPU %s failed: %s; reporting '
                          'no NVLink peers for it.', link, label, exc)
                return {}
            if isinstance(bus_id, bytes):
                bus_id = bus_id.decode('ascii', 'replace')
            try:
                peer = naming.normalize_pci_address(bus_id)
            except ValueError:
                self.warn('NVML NVLink %d of GPU %s: remote PCI bus id %r '
                          'is not a PCI address; ignoring the link.', link,
                          label, bus_id)
                continue
            peers[peer] = peers.get(peer, 0) + 1
        return peers

    def _mig(self, nvml, handle, label: str, gpu: base.Gpu) -> None:
        try:
            current, pending = nvml.nvmlDeviceGetMigMode(handle)
        except nvml.NVMLError_NotSupported:
            gpu.mig_capable = False
            gpu.mig_enabled = False
            return
        except nvml.NVMLError_GpuIsLost:
            raise _GpuLost()
        except nvml.NVMLError as exc:
            self.warn('NVML MIG mode of GPU %s failed: %s; leaving it '
                      'empty.', label, exc)
            return
        gpu.mig_capable = True
        gpu.mig_enabled = current == nvml.NVML_DEVICE_MIG_ENABLE
        gpu.mig_pending = pending == nvml.NVML_DEVICE_MIG_ENABLE

    def _vgpu_types(self, nvml, handle, label: str) -> list[base.MdevType]:
        ids = self._call(label, 'supported vGPU types',
                         nvml.nvmlDeviceGetSupportedVgpus, handle)
        types = []
        for type_id in ids or ():
            type_id = int(getattr(type_id, 'value', type_id))
            what = 'vGPU type %d' % type_id
            name = self._call(label, what + ' name',
                              nvml.nvmlVgpuTypeGetName, type_id)
            fb = self._call(label, what + ' framebuffer',
                            nvml.nvmlVgpuTypeGetFramebufferSize, type_id)
            max_ = self._call(label, what + ' max instances',
                              nvml.nvmlVgpuTypeGetMaxInstances, handle,
                              type_id)
            types.append(base.MdevType(
                id=naming.nvidia_mdev_type_id(type_id),
                name=naming.vgpu_type_name(name),
                framebuffer_mib=(int(fb // (1024 * 1024))
                                 if fb is not None else None),
                max=max_, available=max_ or 0))
        return types
