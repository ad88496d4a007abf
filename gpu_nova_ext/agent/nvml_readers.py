# SPDX-License-Identifier: Apache-2.0

"""What the NVML sampler reads: its readers and its field-value table.

Each reader is one NVML call returning metric keys; a group lists a
reader and its older NVML alternatives.  The field values are read in
one ``nvmlDeviceGetFieldValues`` call.  Metric keys are the sampler's
(and the AMD/Intel sysfs sampler's) common names.
"""
MIB = 1024 * 1024


def field_value(value) -> float:
    vtype = value.valueType
    v = value.value
    if vtype == 0:
        return v.dVal
    if vtype == 1:
        return v.uiVal
    if vtype == 2:
        return v.ulVal
    if vtype == 3:
        return v.ullVal
    if vtype == 4:
        return v.sllVal
    if vtype == 5:
        return v.siVal
    return v.usVal


def fields(nvml):
    """(field id, metric key, scale) read in one nvmlDeviceGetFieldValues."""
    return (
        (nvml.NVML_FI_DEV_MEMORY_TEMP, 'memory_temperature_c', 1),
        (nvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION, 'energy_j', 0.001),
        (nvml.NVML_FI_DEV_PCIE_REPLAY_COUNTER, 'pcie_replay_count', 1),
        (nvml.NVML_FI_DEV_ECC_SBE_VOL_TOTAL, 'ecc_sbe_volatile', 1),
        (nvml.NVML_FI_DEV_ECC_DBE_VOL_TOTAL, 'ecc_dbe_volatile', 1),
        (nvml.NVML_FI_DEV_ECC_SBE_AGG_TOTAL, 'ecc_sbe_aggregate', 1),
        (nvml.NVML_FI_DEV_ECC_DBE_AGG_TOTAL, 'ecc_dbe_aggregate', 1),
        (nvml.NVML_FI_DEV_RETIRED_SBE, 'retired_pages_sbe', 1),
        (nvml.NVML_FI_DEV_RETIRED_DBE, 'retired_pages_dbe', 1),
        (nvml.NVML_FI_DEV_RETIRED_PENDING, 'retired_pages_pending', 1),
        (nvml.NVML_FI_DEV_REMAPPED_COR, 'remapped_rows_correctable', 1),
        (nvml.NVML_FI_DEV_REMAPPED_UNC, 'remapped_rows_uncorrectable', 1),
        (nvml.NVML_FI_DEV_REMAPPED_PENDING, 'remapped_rows_pending', 1),
        (nvml.NVML_FI_DEV_REMAPPED_FAILURE, 'remap_failure', 1),
    )


def readers(nvml):
    """(metric group, [reader, older alternative, ...]) per GPU."""

    def utilization(n, h):
        u = n.nvmlDeviceGetUtilizationRates(h)
        return {'utilization_pct': u.gpu, 'memory_utilization_pct': u.memory}

    def memory_v2(n, h):
        m = n.nvmlDeviceGetMemoryInfo(h, n.nvmlMemory_v2)
        return {'memory_used_mib': m.used // MIB,
                'memory_free_mib': m.free // MIB,
                'memory_reserved_mib': m.reserved // MIB}

    def memory_v1(n, h):
        m = n.nvmlDeviceGetMemoryInfo(h)
        return {'memory_used_mib': m.used // MIB,
                'memory_free_mib': m.free // MIB}

    def temperature_v(n, h):
        return {'temperature_c': n.nvmlDeviceGetTemperatureV(
            h, n.NVML_TEMPERATURE_GPU)}

    def temperature(n, h):
        return {'temperature_c': n.nvmlDeviceGetTemperature(
            h, n.NVML_TEMPERATURE_GPU)}

    def power(n, h):
        return {'power_w': n.nvmlDeviceGetPowerUsage(h) / 1000.0}

    def sm_clock(n, h):
        return {'sm_clock_mhz': n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)}

    def mem_clock(n, h):
        return {'memory_clock_mhz': n.nvmlDeviceGetClockInfo(
            h, n.NVML_CLOCK_MEM)}

    def event_reasons(n, h):
        return {'clocks_event_reasons':
                n.nvmlDeviceGetCurrentClocksEventReasons(h)}

    def throttle_reasons(n, h):
        return {'clocks_event_reasons':
                n.nvmlDeviceGetCurrentClocksThrottleReasons(h)}

    def pstate(n, h):
        return {'pstate': n.nvmlDeviceGetPerformanceState(h)}

    def fan(n, h):
        return {'fan_speed_pct': n.nvmlDeviceGetFanSpeed(h)}

    def pcie_tx(n, h):
        return {'pcie_tx_kbps': n.nvmlDeviceGetPcieThroughput(
            h, n.NVML_PCIE_UTIL_TX_BYTES)}

    def pcie_rx(n, h):
        return {'pcie_rx_kbps': n.nvmlDeviceGetPcieThroughput(
            h, n.NVML_PCIE_UTIL_RX_BYTES)}

    def encoder(n, h):
        return {'encoder_utilization_pct':
                n.nvmlDeviceGetEncoderUtilization(h)[0]}

    def decoder(n, h):
        return {'decoder_utilization_pct':
                n.nvmlDeviceGetDecoderUtilization(h)[0]}

    return (
        ('utilization', (utilization,)),
        ('memory', (memory_v2, memory_v1)),
        ('temperature', (temperature_v, temperature)),
        ('power', (power,)),
        ('sm_clock', (sm_clock,)),
        ('memory_clock', (mem_clock,)),
        ('clocks_event_reasons', (event_reasons, throttle_reasons)),
        ('pstate', (pstate,)),
        ('fan_speed', (fan,)),
        ('pcie_tx', (pcie_tx,)),
        ('pcie_rx', (pcie_rx,)),
        ('encoder', (encoder,)),
        ('decoder', (decoder,)),
    )
