# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's C functions for the system, device facts and vGPUs.

Part of :mod:`gpu_nova_ext_dev.fakes.nvml`, mixed into its
``FakeNvmlLibrary``: each method takes ctypes arguments exactly as pynvml
passes them and returns an ``nvmlReturn_t`` code.
"""
import time
import uuid as uuidlib

import pynvml

from gpu_nova_ext_dev.fakes import nvml_abi as abi
from gpu_nova_ext_dev.fakes import nvml_boards as boards


class InfoCalls:
    """System, device facts and vGPU calls (``self.fake``: the FakeNvml)."""

    @abi.system_fn
    def nvmlSystemGetDriverVersion(self, buf, size):
        return abi.put_string(buf, self.fake.driver_version, size)

    @abi.system_fn
    def nvmlSystemGetNVMLVersion(self, buf, size):
        return abi.put_string(buf, '12.' + self.fake.driver_version, size)

    @abi.system_fn
    def nvmlSystemGetCudaDriverVersion(self, out):
        abi.out(out).value = self.fake.cuda_driver_version
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlSystemGetCudaDriverVersion_v2(self, out):
        abi.out(out).value = self.fake.cuda_driver_version
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlDeviceGetCount_v2(self, out):
        abi.out(out).value = len(self.fake.devices)
        return pynvml.NVML_SUCCESS

    def _set_handle(self, out, dev):
        abi.out(out).contents = dev._struct
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlDeviceGetHandleByIndex_v2(self, index, out):
        index = abi.arg_value(index)
        if not 0 <= index < len(self.fake.devices):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return self._set_handle(out, self.fake.devices[index])

    @abi.system_fn
    def nvmlDeviceGetHandleByPciBusId_v2(self, bus_id, out):
        try:
            wanted = boards.parse_pci(abi.arg_value(bus_id).decode())
        except (ValueError, AttributeError):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        for dev in self.fake.devices:
            if dev.pci == wanted:
                return self._set_handle(out, dev)
        return pynvml.NVML_ERROR_NOT_FOUND

    @abi.system_fn
    def nvmlDeviceGetHandleByUUID(self, uuid, out):
        wanted = abi.arg_value(uuid).decode()
        for dev in self.fake.devices:
            if dev.uuid == wanted:
                return self._set_handle(out, dev)
        return pynvml.NVML_ERROR_NOT_FOUND

    # -- device facts ---------------------------------------------------
    @abi.device_fn
    def nvmlDeviceGetIndex(self, dev, out):
        abi.out(out).value = dev.index
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetName(self, dev, buf, size):
        return abi.put_string(buf, dev.profile.name, size)

    @abi.device_fn
    def nvmlDeviceGetUUID(self, dev, buf, size):
        return abi.put_string(buf, dev.uuid, size)

    @abi.device_fn
    def nvmlDeviceGetSerial(self, dev, buf, size):
        return abi.put_string(buf, dev.serial, size)

    @abi.device_fn
    def nvmlDeviceGetArchitecture(self, dev, out):
        abi.out(out).value = dev.profile.arch
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetMemoryInfo(self, dev, out):
        mem = abi.out(out)
        p, m = dev.profile, dev.metrics
        mem.total = p.memory_mib * boards.MIB
        mem.used = (m.memory_used_mib + p.reserved_mib) * boards.MIB
        mem.free = mem.total - mem.used
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetMemoryInfo_v2(self, dev, out):
        mem = abi.out(out)
        if mem.version != pynvml.nvmlMemory_v2:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        p, m = dev.profile, dev.metrics
        mem.total = p.memory_mib * boards.MIB
        mem.reserved = p.reserved_mib * boards.MIB
        mem.used = m.memory_used_mib * boards.MIB
        mem.free = mem.total - mem.reserved - mem.used
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPciInfo_v3(self, dev, out):
        info = abi.out(out)
        domain, bus, device, _fn = dev.pci
        info.busIdLegacy = ('%04X:%02X:%02X.%X' % dev.pci).encode()
        info.busId = dev.bus_id.encode()
        info.domain, info.bus, info.device = domain, bus, device
        info.pciDeviceId = dev.profile.pci_device_id
        info.pciSubSystemId = dev.profile.pci_subsystem_id
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetCudaComputeCapability(self, dev, major, minor):
        abi.out(major).value, abi.out(minor).value = dev.profile.cuda_cc
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetMigMode(self, dev, current, pending):
        if not dev.profile.mig_capable:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        abi.out(current).value = dev.mig_current
        abi.out(pending).value = dev.mig_pending
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTemperatureThreshold(self, dev, which, out):
        p = dev.profile
        value = {
            pynvml.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: p.shutdown_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: p.slowdown_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_GPU_MAX: p.gpu_max_c,
            pynvml.NVML_TEMPERATURE_THRESHOLD_MEM_MAX: p.mem_max_c,
        }.get(abi.arg_value(which))
        if value is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        abi.out(out).value = value
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPowerManagementLimit(self, dev, out):
        abi.out(out).value = dev.power_limit_mw()
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetEnforcedPowerLimit(self, dev, out):
        abi.out(out).value = dev.power_limit_mw()
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPowerManagementDefaultLimit(self, dev, out):
        abi.out(out).value = dev.profile.power_default_limit_mw
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPowerManagementLimitConstraints(self, dev, lo, hi):
        abi.out(lo).value = dev.profile.power_min_limit_mw
        abi.out(hi).value = dev.profile.power_max_limit_mw
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceSetPowerManagementLimit(self, dev, limit):
        # nvml.h: INVALID_ARGUMENT outside the constraints, NO_PERMISSION
        # unless root (set_error), NOT_SUPPORTED where not settable
        limit = abi.arg_value(limit)
        p = dev.profile
        if not p.power_min_limit_mw <= limit <= p.power_max_limit_mw:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        dev.metrics.power_limit_mw = limit
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetMaxClockInfo(self, dev, clock, out):
        value = {pynvml.NVML_CLOCK_GRAPHICS: dev.profile.max_sm_clock,
                 pynvml.NVML_CLOCK_SM: dev.profile.max_sm_clock,
                 pynvml.NVML_CLOCK_MEM: dev.profile.max_mem_clock,
                 pynvml.NVML_CLOCK_VIDEO: 1950}.get(abi.arg_value(clock))
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        abi.out(out).value = value
        return pynvml.NVML_SUCCESS

    # -- vGPU -------------------------------------------------------------
    def _vgpu_type(self, type_id):
        type_id = abi.arg_value(type_id)
        for dev in self.fake.devices:
            for t in dev.profile.vgpu_types:
                if t.type_id == type_id:
                    return t
        return None

    @staticmethod
    def _fill_array(count, array, values):
        count = abi.out(count)
        needed = len(values)
        if array is None:
            count.value = needed
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if needed
                    else pynvml.NVML_SUCCESS)
        if count.value < needed:
            count.value = needed
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        array = abi.out(array)
        for i, v in enumerate(values):
            array[i] = v
        count.value = needed
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetSupportedVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [t.type_id for t in dev.profile.vgpu_types])

    @abi.device_fn
    def nvmlDeviceGetCreatableVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [t.type_id for t in dev.profile.vgpu_types])

    @abi.device_fn
    def nvmlDeviceGetActiveVgpus(self, dev, count, array):
        return self._fill_array(
            count, array, [v[0] for v in dev.active_vgpus])

    @abi.device_fn
    def nvmlDeviceGetVgpuUtilization(self, dev, timestamp, value_type,
                                     count, samples):
        abi.out(value_type).value = pynvml.NVML_VALUE_TYPE_UNSIGNED_INT
        count = abi.out(count)
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
        'nvmlVgpuTypeGetName', lambda t, buf, size: abi.put_string(
            buf, t.name, size))
    nvmlVgpuTypeGetClass = _vgpu_type_fn(
        'nvmlVgpuTypeGetClass', lambda t, buf, size: abi.put_string(
            buf, t.vgpu_class, size))

    def _fb(t, out):
        abi.out(out).value = t.framebuffer_mib * boards.MIB
        return pynvml.NVML_SUCCESS

    nvmlVgpuTypeGetFramebufferSize = _vgpu_type_fn(
        'nvmlVgpuTypeGetFramebufferSize', _fb)
    del _fb

    @abi.device_fn
    def nvmlVgpuTypeGetMaxInstances(self, dev, type_id, out):
        type_id = abi.arg_value(type_id)
        for t in dev.profile.vgpu_types:
            if t.type_id == type_id:
                abi.out(out).value = t.max_instances
                return pynvml.NVML_SUCCESS
        return pynvml.NVML_ERROR_INVALID_ARGUMENT

    def _instance(self, inst):
        inst = abi.arg_value(inst)
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
        abi.out(out).value = v[1]
        return pynvml.NVML_SUCCESS

    def nvmlVgpuInstanceGetUUID(self, inst, buf, size):
        self.fake.calls['nvmlVgpuInstanceGetUUID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        return abi.put_string(buf, str(uuidlib.UUID(int=v[0])), size)

    def nvmlVgpuInstanceGetMdevUUID(self, inst, buf, size):
        self.fake.calls['nvmlVgpuInstanceGetMdevUUID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        mdev = dev.vgpu_vms.get(v[0], (None, None))[0]
        if mdev is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        return abi.put_string(buf, mdev, size)

    def nvmlVgpuInstanceGetVmID(self, inst, buf, size, id_type):
        self.fake.calls['nvmlVgpuInstanceGetVmID'] += 1
        dev, v = self._instance(inst)
        if v is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        vm = dev.vgpu_vms.get(v[0], (None, None))[1]
        if vm is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        abi.out(id_type).value = pynvml.NVML_VGPU_VM_ID_UUID
        return abi.put_string(buf, vm, size)

    del _vgpu_type_fn

    # -- topology ---------------------------------------------------------
    @staticmethod
    def _link(dev, link):
        """(code, remote (domain, bus, device, function) or None)."""
        if not dev.profile.nvlinks:
            return pynvml.NVML_ERROR_NOT_SUPPORTED, None
        link = abi.arg_value(link)
        if not 0 <= link < dev.profile.nvlinks:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT, None
        remote = dev.nvlinks[link] if link < len(dev.nvlinks) else None
        return pynvml.NVML_SUCCESS, remote

    def _remote_device(self, pci):
        for other in self.fake.devices:
            if other.pci == pci:
                return other
        return None

    @abi.device_fn
    def nvmlDeviceGetNvLinkState(self, dev, link, out):
        code, remote = self._link(dev, link)
        if code == pynvml.NVML_SUCCESS:
            abi.out(out).value = (pynvml.NVML_FEATURE_ENABLED if remote
                                  else pynvml.NVML_FEATURE_DISABLED)
        return code

    @abi.device_fn
    def nvmlDeviceGetNvLinkRemotePciInfo_v2(self, dev, link, out):
        code, remote = self._link(dev, link)
        if code != pynvml.NVML_SUCCESS:
            return code
        if remote is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT  # an inactive link
        info = abi.out(out)
        other = self._remote_device(remote)
        info.busIdLegacy = ('%04X:%02X:%02X.%X' % remote).encode()
        info.busId = ('%08X:%02X:%02X.%X' % remote).encode()
        info.domain, info.bus, info.device = remote[:3]
        info.pciDeviceId = (other.profile.pci_device_id if other
                            else boards.NVSWITCH_PCI_DEVICE_ID)
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetNvLinkRemoteDeviceType(self, dev, link, out):
        code, remote = self._link(dev, link)
        if code != pynvml.NVML_SUCCESS:
            return code
        if remote is None:
            abi.out(out).value = pynvml.NVML_NVLINK_DEVICE_TYPE_UNKNOWN
        elif self._remote_device(remote) is not None:
            abi.out(out).value = pynvml.NVML_NVLINK_DEVICE_TYPE_GPU
        else:
            abi.out(out).value = pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTopologyCommonAncestor(self, dev, other, out):
        other = self.fake.device_by_handle(other)
        if other is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if other is dev:
            level = pynvml.NVML_TOPOLOGY_INTERNAL
        elif dev.pci_switch and dev.pci_switch == other.pci_switch:
            level = pynvml.NVML_TOPOLOGY_SINGLE
        elif dev.root_port and dev.root_port == other.root_port:
            level = pynvml.NVML_TOPOLOGY_MULTIPLE
        elif dev.numa_node == other.numa_node:
            level = pynvml.NVML_TOPOLOGY_NODE
        else:
            level = pynvml.NVML_TOPOLOGY_SYSTEM
        abi.out(out).value = level
        return pynvml.NVML_SUCCESS
