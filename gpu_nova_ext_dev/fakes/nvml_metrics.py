# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's C functions for metrics, errors and events.

Part of :mod:`gpu_nova_ext_dev.fakes.nvml`, mixed into its
``FakeNvmlLibrary``: each method takes ctypes arguments exactly as pynvml
passes them and returns an ``nvmlReturn_t`` code.
"""
import ctypes
import queue
import time

import pynvml

from gpu_nova_ext_dev.fakes import nvml_abi as abi


class MetricCalls:
    """Metric, ECC, field value and event calls.

    ``self.fake`` is the FakeNvml.
    """

    # -- metrics ----------------------------------------------------------
    @abi.device_fn
    def nvmlDeviceGetUtilizationRates(self, dev, out):
        util = abi.out(out)
        util.gpu = dev.metrics.gpu_util
        util.memory = dev.metrics.mem_util
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTemperature(self, dev, sensor, out):
        if abi.arg_value(sensor) != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        abi.out(out).value = dev.metrics.temperature_c
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTemperatureV(self, dev, out):
        temp = abi.out(out)
        if temp.version != pynvml.nvmlTemperature_v1:
            return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
        if temp.sensorType != pynvml.NVML_TEMPERATURE_GPU:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        temp.temperature = dev.metrics.temperature_c
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPowerUsage(self, dev, out):
        abi.out(out).value = dev.power_mw()
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTotalEnergyConsumption(self, dev, out):
        abi.out(out).value = dev.energy_mj()
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetClockInfo(self, dev, clock, out):
        m = dev.metrics
        clocks = {pynvml.NVML_CLOCK_GRAPHICS: m.graphics_clock_mhz,
                  pynvml.NVML_CLOCK_SM: m.sm_clock_mhz,
                  pynvml.NVML_CLOCK_MEM: (m.mem_clock_mhz
                                          or dev.profile.max_mem_clock),
                  pynvml.NVML_CLOCK_VIDEO: m.video_clock_mhz}
        value = clocks.get(abi.arg_value(clock))
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        abi.out(out).value = value
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetCurrentClocksEventReasons(self, dev, out):
        abi.out(out).value = dev.metrics.clocks_event_reasons
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetCurrentClocksThrottleReasons(self, dev, out):
        abi.out(out).value = dev.metrics.clocks_event_reasons
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPerformanceState(self, dev, out):
        abi.out(out).value = dev.metrics.pstate
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetFanSpeed(self, dev, out):
        abi.out(out).value = dev.metrics.fan_pct
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPcieThroughput(self, dev, counter, out):
        counter = abi.arg_value(counter)
        if counter == pynvml.NVML_PCIE_UTIL_TX_BYTES:
            abi.out(out).value = dev.metrics.pcie_tx_kbps
        elif counter == pynvml.NVML_PCIE_UTIL_RX_BYTES:
            abi.out(out).value = dev.metrics.pcie_rx_kbps
        else:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetPcieReplayCounter(self, dev, out):
        abi.out(out).value = dev.metrics.pcie_replay
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetEncoderUtilization(self, dev, util, period):
        abi.out(util).value = dev.metrics.enc_util
        abi.out(period).value = 167000
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetDecoderUtilization(self, dev, util, period):
        abi.out(util).value = dev.metrics.dec_util
        abi.out(period).value = 167000
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetTotalEccErrors(self, dev, error_type, counter, out):
        m = dev.metrics
        key = (abi.arg_value(error_type), abi.arg_value(counter))
        value = {
            (0, 0): m.ecc_sbe_volatile, (1, 0): m.ecc_dbe_volatile,
            (0, 1): m.ecc_sbe_aggregate, (1, 1): m.ecc_dbe_aggregate,
        }.get(key)
        if value is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        abi.out(out).value = value
        return pynvml.NVML_SUCCESS

    def _retired(self, dev, cause, count, pages, times):
        n = (dev.metrics.retired_sbe_pages if abi.arg_value(cause) == 0
             else dev.metrics.retired_dbe_pages)
        count = abi.out(count)
        if pages is None or count.value < n:
            count.value = n
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if n
                    else pynvml.NVML_SUCCESS)
        for i in range(n):
            pages[i] = 0x1000 * (i + 1) + abi.arg_value(cause)
            if times is not None:
                times[i] = 1764400000 + i
        count.value = n
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetRetiredPages(self, dev, cause, count, pages):
        return self._retired(dev, cause, count, pages, None)

    @abi.device_fn
    def nvmlDeviceGetRetiredPages_v2(self, dev, cause, count, pages,
                                     times=None):
        return self._retired(dev, cause, count, pages, times)

    @abi.device_fn
    def nvmlDeviceGetRetiredPagesPendingStatus(self, dev, out):
        abi.out(out).value = int(bool(dev.metrics.retired_pending))
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetRemappedRows(self, dev, corr, unc, pending, failure):
        m = dev.metrics
        abi.out(corr).value = m.remapped_cor
        abi.out(unc).value = m.remapped_unc
        abi.out(pending).value = m.remap_pending
        abi.out(failure).value = m.remap_failure
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetFieldValues(self, dev, count, values):
        values = abi.out(values)
        now_us = int(time.time() * 1e6)
        for i in range(abi.arg_value(count)):
            v = values[i]
            fid = v.fieldId
            v.timestamp = now_us
            v.latencyUsec = 0
            code = dev.field_errors.get(fid)
            spec = abi.FIELD_VALUES.get(fid)
            if code is None and spec is None:
                code = pynvml.NVML_ERROR_NOT_SUPPORTED
            if code is not None:
                v.nvmlReturn = code
                continue
            vtype, getter = spec
            v.nvmlReturn = pynvml.NVML_SUCCESS
            v.valueType = vtype
            setattr(v.value, abi.VALUE_ATTR[vtype], int(getter(dev)))
        return pynvml.NVML_SUCCESS

    # -- events -------------------------------------------------------------
    @abi.device_fn
    def nvmlDeviceGetSupportedEventTypes(self, dev, out):
        abi.out(out).value = abi.SUPPORTED_EVENTS
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlEventSetCreate(self, out):
        es = abi.EventSet()
        self.fake.event_sets[ctypes.addressof(es.struct)] = es
        abi.out(out).contents = es.struct
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceRegisterEvents(self, dev, types, event_set):
        es = self.fake.event_set(event_set)
        if es is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        mask = abi.arg_value(types)
        if mask & ~abi.SUPPORTED_EVENTS:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        es.registered[dev.index] = es.registered.get(dev.index, 0) | mask
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlEventSetWait_v2(self, event_set, data, timeout_ms):
        es = self.fake.event_set(event_set)
        if es is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        try:
            dev, etype, edata = es.queue.get(
                timeout=max(abi.arg_value(timeout_ms), 0) / 1000.0)
        except queue.Empty:
            return pynvml.NVML_ERROR_TIMEOUT
        out = abi.out(data)
        out.device = dev.handle
        out.eventType = etype
        out.eventData = edata
        out.gpuInstanceId = 0xFFFFFFFF
        out.computeInstanceId = 0xFFFFFFFF
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlEventSetFree(self, event_set):
        key = ctypes.addressof(event_set.contents) if event_set else None
        if self.fake.event_sets.pop(key, None) is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return pynvml.NVML_SUCCESS

    @abi.system_fn
    def nvmlErrorString(self, code):
        return None
