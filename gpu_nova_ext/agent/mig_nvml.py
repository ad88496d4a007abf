# SPDX-License-Identifier: Apache-2.0

"""A GPU's MIG state read, and a layout plan carried out, through NVML.

Reads run here, in the unprivileged agent: ``nvmlDeviceGetMigMode``,
``nvmlDeviceGetGpuInstanceProfileInfo`` (V), ``nvmlDeviceGetGpuInstances``,
``nvmlGpuInstanceGetInfo``.  Changes (``nvmlDeviceSetMigMode``,
``nvmlDeviceCreateGpuInstanceWithPlacement``, ``nvmlGpuInstanceDestroy``)
run in the privsep daemon (:mod:`gpu_nova_ext.privsep.gpu`), which is
given the GPU's PCI address and the driver's ids, never a handle.
Profile ids come from the driver (``info.id``), not from the shipped
table, so a driver that numbers them otherwise still works.
"""
import ctypes
import dataclasses

from gpu_nova_ext.inventory import mig_profiles
from gpu_nova_ext import privsep
from gpu_nova_ext.privsep import gpu as privileged


@dataclasses.dataclass
class MigState:
    current: bool | None = None       # None: not MIG-capable
    pending: bool | None = None
    #: (profile name, start, the driver's GPU-instance id)
    instances: list = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class ApplyResult:
    done: list[str] = dataclasses.field(default_factory=list)
    pending: list[str] = dataclasses.field(default_factory=list)
    failed: list[str] = dataclasses.field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.done)


def driver_profiles(nvml, handle, board) -> dict[str, int]:
    """Profile name -> the driver's profile id, for the board's profiles."""
    ids = {}
    for profile in board.profiles:
        try:
            info = nvml.nvmlDeviceGetGpuInstanceProfileInfo(
                handle, profile.nvml_index)
        except nvml.NVMLError_NotSupported:
            continue
        ids[profile.name] = info.id
    return ids


def read_state(nvml, handle, board: mig_profiles.MigBoard | None) -> MigState:
    try:
        current, pending = nvml.nvmlDeviceGetMigMode(handle)
    except nvml.NVMLError_NotSupported:
        return MigState()
    state = MigState(current == nvml.NVML_DEVICE_MIG_ENABLE,
                     pending == nvml.NVML_DEVICE_MIG_ENABLE)
    if not state.current or board is None:
        return state
    for name, profile_id in driver_profiles(nvml, handle, board).items():
        profile = board.profile(name)
        count = ctypes.c_uint(profile.max_instances)
        array = (nvml.c_nvmlGpuInstance_t * profile.max_instances)()
        nvml.nvmlDeviceGetGpuInstances(handle, profile_id, array,
                                       ctypes.byref(count))
        for i in range(count.value):
            info = nvml.nvmlGpuInstanceGetInfo(array[i])
            state.instances.append((name, info.placement.start, info.id))
    return state


def _error(nvml, exc) -> str:
    names = {nvml.NVML_ERROR_IN_USE: 'in use',
             nvml.NVML_ERROR_INSUFFICIENT_RESOURCES: 'insufficient '
             'resources',
             nvml.NVML_ERROR_RESET_REQUIRED: 'GPU reset required',
             nvml.NVML_ERROR_NO_PERMISSION: 'no permission (the privsep '
             'daemon lacks CAP_SYS_ADMIN: see [%s] capabilities)'
             % privsep.GROUP}
    if isinstance(exc, privileged.DAEMON_ERRORS):
        return privileged.daemon_error(exc)
    value = getattr(exc, 'value', None)
    return names.get(value) or 'NVML error %s' % value


def apply_plan(nvml, handle, board, plan, state: MigState) -> ApplyResult:
    """Run ``plan.steps`` on the GPU; stop at the first failure.

    ``handle`` serves the reads; each change is a privileged call.
    """
    result = ApplyResult()
    gpu_instance_ids = {(name, start): gi_id
                        for name, start, gi_id in state.instances}
    ids = None
    for kind, what in plan.steps:
        try:
            if kind == 'enable':
                status = privileged.set_mig_mode(plan.pci_address, True)
                if status != nvml.NVML_SUCCESS:
                    result.pending.append(
                        'MIG mode enabled, pending until a GPU reset (%s)'
                        % _error(nvml, nvml.NVMLError(status)))
                    return result
                result.done.append('enabled MIG mode')
            elif kind == 'destroy':
                privileged.destroy_gpu_instance(plan.pci_address,
                                                gpu_instance_ids[what])
                result.done.append('destroyed %s at slice %d' % what)
            else:
                if ids is None:
                    ids = driver_profiles(nvml, handle, board)
                profile = board.profile(what[0])
                privileged.create_gpu_instance(
                    plan.pci_address, ids[what[0]], what[1],
                    profile.memory_slices)
                result.done.append('created %s at slice %d' % what)
        except (nvml.NVMLError, privileged.NvmlCallFailed,
                *privileged.DAEMON_ERRORS) as exc:
            result.failed.append('%s %s: %s' % (
                kind, '%s at slice %d' % what if what else 'MIG mode',
                _error(nvml, exc)))
            return result
    return result
