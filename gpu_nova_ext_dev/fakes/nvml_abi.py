# SPDX-License-Identifier: Apache-2.0

"""The C ABI side of the fake NVML: argument helpers and call rules.

Part of :mod:`gpu_nova_ext_dev.fakes.nvml`: what every fake C
function shares (``byref()`` outputs, string buffers, the lost /
error / uninitialized rules of a device or system call), the field values
``nvmlDeviceGetFieldValues`` serves, and an event set.
"""
import ctypes
import queue

import pynvml

from gpu_nova_ext_dev.fakes import nvml_boards as boards

_Device = boards.FakeDevice


class EventSet:
    def __init__(self):
        self.struct = pynvml.struct_c_nvmlEventSet_t()
        self.registered: dict[int, int] = {}   # device index -> mask
        self.queue: queue.Queue = queue.Queue()


SUPPORTED_EVENTS = (
    pynvml.nvmlEventTypeSingleBitEccError
    | pynvml.nvmlEventTypeDoubleBitEccError
    | pynvml.nvmlEventTypePState
    | pynvml.nvmlEventTypeXidCriticalError
    | pynvml.nvmlEventTypeClock)


def out(arg):
    """The ctypes object behind a byref() argument (or the object itself)."""
    return getattr(arg, '_obj', arg)


def put_string(buf, text: str, size) -> int:
    data = text.encode()
    size = out(size)
    size = size.value if hasattr(size, 'value') else int(size)
    if len(data) + 1 > size:
        return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
    buf = out(buf)
    ctypes.memmove(buf, data + b'\0', len(data) + 1)
    return pynvml.NVML_SUCCESS


def arg_value(arg):
    """The value of a ctypes argument (``c_uint``, ``c_char_p``) or int."""
    return arg.value if hasattr(arg, 'value') else int(arg)


def device_fn(func):
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


def system_fn(func):
    name = func.__name__

    def wrapper(self, *args):
        self.fake.calls[name] += 1
        if not self.fake.initialized:
            return pynvml.NVML_ERROR_UNINITIALIZED
        return func(self, *args)
    wrapper.__name__ = name
    return wrapper


FIELD_VALUES = {
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
    pynvml.NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: (3, _Device.energy_mj),
    pynvml.NVML_FI_DEV_POWER_INSTANT: (1, _Device.power_mw),
    pynvml.NVML_FI_DEV_POWER_CURRENT_LIMIT: (1, _Device.power_limit_mw),
}
VALUE_ATTR = {1: 'uiVal', 3: 'ullVal'}
