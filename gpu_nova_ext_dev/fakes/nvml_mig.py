# SPDX-License-Identifier: Apache-2.0

"""The fake NVML's MIG: mode, GPU-instance profiles, placements, instances.

Part of :mod:`gpu_nova_ext_dev.fakes.nvml`.  The C functions of nvml.h's
"Multi Instance GPU Management" section that an administrator uses to lay
a GPU out, with the return codes nvml.h documents for them:

* ``nvmlDeviceSetMigMode(device, mode, *activationStatus)``: NOT_SUPPORTED
  on a board without MIG; IN_USE while vGPUs run on the GPU or (to
  disable) GPU instances exist; else the pending mode changes, and the
  current mode with it when the driver can reset the GPU at once.  When
  it cannot (``FakeDevice.mig_activation_blocker``: a process holds the
  GPU, or the platform has no GPU reset) the call succeeds, the mode
  stays pending and ``activationStatus`` says why (IN_USE /
  RESET_REQUIRED); ``FakeNvml.reset_gpu`` (a GPU reset, a reboot) makes
  the pending mode current.
* ``nvmlDeviceGetGpuInstanceProfileInfo`` / ``...InfoV``: the board's
  profile by NVML profile index, whatever the MIG mode; NOT_SUPPORTED for
  an index the board lacks, INVALID_ARGUMENT beyond
  ``NVML_GPU_INSTANCE_PROFILE_COUNT``, VERSION_MISMATCH for a V call
  without the v2 version.
* ``nvmlDeviceGetGpuInstancePossiblePlacements_v2``: every placement of a
  profile id whatever the mode (a NULL array asks for the count).
* ``nvmlDeviceGetGpuInstanceRemainingCapacity``,
  ``nvmlDeviceCreateGpuInstance(WithPlacement)``,
  ``nvmlDeviceGetGpuInstances``, ``nvmlDeviceGetGpuInstanceById``:
  NOT_SUPPORTED unless MIG mode is current; a new instance must not
  overlap the memory slices of another, nor exceed the profile's
  instance count or the board's compute slices (INSUFFICIENT_RESOURCES);
  a placement that is not one of the profile's is INVALID_ARGUMENT.
* ``nvmlGpuInstanceDestroy``: IN_USE while something runs on the
  instance (``FakeNvml.use_gpu_instance``); ``nvmlGpuInstanceGetInfo``.

Compute instances are not modelled: for MIG-backed vGPU the host creates
GPU instances only (the guest creates its compute instances).  Instance
ids are the lowest free id from 1; a real driver derives them from the
placement (only real hardware says which).
"""
import ctypes
import dataclasses

import pynvml

from gpu_nova_ext_dev.fakes import nvml_abi as abi
from gpu_nova_ext.inventory import mig_profiles


@dataclasses.dataclass(eq=False)
class GpuInstance:
    """One GPU instance; ``handle`` is a real c_nvmlGpuInstance_t."""

    device: object
    gi_id: int
    profile: mig_profiles.MigProfile
    start: int
    in_use: bool = False
    struct: pynvml.struct_c_nvmlGpuInstance_t = dataclasses.field(
        default_factory=pynvml.struct_c_nvmlGpuInstance_t)

    def __post_init__(self):
        self.handle = ctypes.pointer(self.struct)

    @property
    def slices(self) -> range:
        return range(self.start, self.start + self.profile.memory_slices)


def board_of(dev) -> mig_profiles.MigBoard | None:
    key = dev.profile.mig_board
    return mig_profiles.board(key) if key else None


def fits(board: mig_profiles.MigBoard, occupied, profile, start) -> bool:
    """Whether ``profile`` at ``start`` fits beside ``occupied``.

    ``occupied``: ``(profile, start)`` of the instances there.
    """
    if sum(1 for p, _s in occupied
           if p.profile_id == profile.profile_id) >= profile.max_instances:
        return False
    if sum(p.compute_slices for p, _s in occupied) + (
            profile.compute_slices) > board.compute_slices:
        return False
    wanted = set(range(start, start + profile.memory_slices))
    return not any(wanted & set(range(s, s + p.memory_slices))
                   for p, s in occupied)


def occupied(dev) -> list:
    return [(gi.profile, gi.start) for gi in dev.gpu_instances.values()]


def gpu_instance_fn(func):
    """Resolve a GPU-instance handle; apply the device's rules."""
    name = func.__name__

    def wrapper(self, handle, *args):
        self.fake.calls[name] += 1
        if not self.fake.initialized:
            return pynvml.NVML_ERROR_UNINITIALIZED
        gi = self.fake.gpu_instance_by_handle(handle)
        if gi is None:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if gi.device.lost:
            return pynvml.NVML_ERROR_GPU_IS_LOST
        code = gi.device.errors.get(name)
        if code is not None:
            return code
        return func(self, gi, *args)
    wrapper.__name__ = name
    return wrapper


class MigCalls:
    """The MIG C functions of the fake library (a mixin of the library)."""

    @abi.device_fn
    def nvmlDeviceSetMigMode(self, dev, mode, activation):
        mode = abi.arg_value(mode)
        if not dev.profile.mig_capable:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        if mode not in (pynvml.NVML_DEVICE_MIG_DISABLE,
                        pynvml.NVML_DEVICE_MIG_ENABLE):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        if dev.active_vgpus or (
                mode == pynvml.NVML_DEVICE_MIG_DISABLE and dev.gpu_instances):
            return pynvml.NVML_ERROR_IN_USE
        dev.mig_pending = mode
        if dev.mig_activation_blocker is None:
            dev.mig_current = mode
            abi.out(activation).value = pynvml.NVML_SUCCESS
        else:
            abi.out(activation).value = dev.mig_activation_blocker
        return pynvml.NVML_SUCCESS

    def _profile_info(self, dev, index, info, v2):
        index = abi.arg_value(index)
        board = board_of(dev)
        if board is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        if not 0 <= index < pynvml.NVML_GPU_INSTANCE_PROFILE_COUNT:
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        profile = board.by_index(index)
        if profile is None:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        info = abi.out(info)
        if v2:
            if info.version != pynvml.nvmlGpuInstanceProfileInfo_v2:
                return pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH
            info.name = ('MIG ' + profile.name).encode()
        info.id = profile.profile_id
        info.isP2pSupported = 0
        info.sliceCount = profile.compute_slices
        info.instanceCount = profile.max_instances
        info.multiprocessorCount = 0
        info.copyEngineCount = profile.compute_slices
        info.decoderCount = 0
        info.encoderCount = 0
        info.jpegCount = 1 if profile.name.endswith('+me') else 0
        info.ofaCount = info.jpegCount
        info.memorySizeMB = profile.memory_mib
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetGpuInstanceProfileInfo(self, dev, index, info):
        return self._profile_info(dev, index, info, v2=False)

    @abi.device_fn
    def nvmlDeviceGetGpuInstanceProfileInfoV(self, dev, index, info):
        return self._profile_info(dev, index, info, v2=True)

    @staticmethod
    def _profile_by_id(dev, profile_id):
        board = board_of(dev)
        if board is None:
            return None, pynvml.NVML_ERROR_NOT_SUPPORTED
        profile = board.by_id(abi.arg_value(profile_id))
        if profile is None:
            return None, pynvml.NVML_ERROR_INVALID_ARGUMENT
        return profile, pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetGpuInstancePossiblePlacements_v2(
            self, dev, profile_id, placements, count):
        profile, code = self._profile_by_id(dev, profile_id)
        if profile is None:
            return code
        count = abi.out(count)
        needed = len(profile.starts)
        if placements is None:
            count.value = needed
            return pynvml.NVML_SUCCESS
        if count.value < needed:
            count.value = needed
            return pynvml.NVML_ERROR_INSUFFICIENT_SIZE
        array = abi.out(placements)
        for i, start in enumerate(profile.starts):
            array[i].start = start
            array[i].size = profile.memory_slices
        count.value = needed
        return pynvml.NVML_SUCCESS

    @staticmethod
    def _mig_profile(dev, profile_id):
        """The profile of an id on a device in MIG mode, or an error."""
        profile, code = MigCalls._profile_by_id(dev, profile_id)
        if profile is None:
            return None, code
        if dev.mig_current != pynvml.NVML_DEVICE_MIG_ENABLE:
            return None, pynvml.NVML_ERROR_NOT_SUPPORTED
        return profile, pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetGpuInstanceRemainingCapacity(self, dev, profile_id,
                                                  count):
        profile, code = self._mig_profile(dev, profile_id)
        if profile is None:
            return code
        taken = occupied(dev)
        before = len(taken)
        for start in profile.starts:
            if fits(board_of(dev), taken, profile, start):
                taken.append((profile, start))
        abi.out(count).value = len(taken) - before
        return pynvml.NVML_SUCCESS

    def _create(self, dev, profile, start, out):
        board, taken = board_of(dev), occupied(dev)
        if start is None:
            start = next((s for s in profile.starts
                          if fits(board, taken, profile, s)), None)
            if start is None:
                return pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
        elif not fits(board, taken, profile, start):
            return pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
        gi_id = 1
        while gi_id in dev.gpu_instances:
            gi_id += 1
        gi = GpuInstance(dev, gi_id, profile, start)
        dev.gpu_instances[gi_id] = gi
        self.fake.register_gpu_instance(gi)
        abi.out(out).contents = gi.struct
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceCreateGpuInstance(self, dev, profile_id, out):
        profile, code = self._mig_profile(dev, profile_id)
        if profile is None:
            return code
        return self._create(dev, profile, None, out)

    @abi.device_fn
    def nvmlDeviceCreateGpuInstanceWithPlacement(self, dev, profile_id,
                                                 placement, out):
        profile, code = self._mig_profile(dev, profile_id)
        if profile is None:
            return code
        placement = abi.out(placement)
        if hasattr(placement, 'contents'):
            placement = placement.contents
        if (placement.start not in profile.starts or
                placement.size != profile.memory_slices):
            return pynvml.NVML_ERROR_INVALID_ARGUMENT
        return self._create(dev, profile, placement.start, out)

    @abi.device_fn
    def nvmlDeviceGetGpuInstances(self, dev, profile_id, instances, count):
        profile, code = self._mig_profile(dev, profile_id)
        if profile is None:
            return code
        found = sorted((gi for gi in dev.gpu_instances.values()
                        if gi.profile.profile_id == profile.profile_id),
                       key=lambda gi: gi.gi_id)
        count = abi.out(count)
        if instances is None or count.value < len(found):
            count.value = len(found)
            return (pynvml.NVML_ERROR_INSUFFICIENT_SIZE if found
                    else pynvml.NVML_SUCCESS)
        array = abi.out(instances)
        for i, gi in enumerate(found):
            array[i] = gi.handle
        count.value = len(found)
        return pynvml.NVML_SUCCESS

    @abi.device_fn
    def nvmlDeviceGetGpuInstanceById(self, dev, gi_id, out):
        if dev.mig_current != pynvml.NVML_DEVICE_MIG_ENABLE:
            return pynvml.NVML_ERROR_NOT_SUPPORTED
        gi = dev.gpu_instances.get(abi.arg_value(gi_id))
        if gi is None:
            return pynvml.NVML_ERROR_NOT_FOUND
        abi.out(out).contents = gi.struct
        return pynvml.NVML_SUCCESS

    @gpu_instance_fn
    def nvmlGpuInstanceDestroy(self, gi):
        if gi.in_use:
            return pynvml.NVML_ERROR_IN_USE
        del gi.device.gpu_instances[gi.gi_id]
        self.fake.unregister_gpu_instance(gi)
        return pynvml.NVML_SUCCESS

    @gpu_instance_fn
    def nvmlGpuInstanceGetInfo(self, gi, info):
        info = abi.out(info)
        info.device = gi.device.handle
        info.id = gi.gi_id
        info.profileId = gi.profile.profile_id
        info.placement.start = gi.start
        info.placement.size = gi.profile.memory_slices
        return pynvml.NVML_SUCCESS
