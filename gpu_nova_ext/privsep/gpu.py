# SPDX-License-Identifier: Apache-2.0

"""The privileged GPU setters: every change the agent makes to a GPU.

Each entry point runs in the privsep daemon.  privsep carries arguments,
return values and exceptions between the processes as plain values, so
these take a GPU's PCI address and numbers, never an NVML handle (the
daemon resolves its own), and return numbers.  An NVML failure comes back
as :class:`NvmlCallFailed` carrying NVML's return code: pynvml's
``NVMLError_*`` classes cannot be rebuilt from their arguments on the
agent's side, ``nvml.NVMLError(exc.value)`` gives the typed one again.
Reads stay in the agent; nothing outside this package calls an NVML
setter or writes sysfs (gpu_nova_ext/tests/unit/privsep/test_boundary.py
reads the source for it).  design doc: Privileged work.
"""
import contextlib
import ctypes
import glob
import os

from oslo_privsep import daemon

from gpu_nova_ext import naming
from gpu_nova_ext import privsep

#: the sysfs attributes the daemon writes, under a GPU's hwmon directory
SYSFS_ATTRIBUTES = frozenset({'power1_cap'})


#: the daemon did not start (sudo refused or missing, the helper failed)
#: or its channel broke: the change was not made
DAEMON_ERRORS = (daemon.FailedToDropPrivileges, daemon.ProtocolError,
                 FileNotFoundError)


def daemon_error(exc: Exception) -> str:
    """One line for a ``DAEMON_ERRORS`` exception, naming the fix."""
    return ('the privileged daemon did not run it (%s): check '
            '/etc/sudoers.d/gpu-nova-agent and [%s] helper_command' % (
                exc, privsep.GROUP))


class NvmlCallFailed(Exception):
    """An NVML call of the daemon failed with return code ``value``."""

    def __init__(self, value: int):
        super().__init__(value)
        self.value = value


class RefusedWrite(Exception):
    """The daemon refused a sysfs write (the message says why)."""


@contextlib.contextmanager
def _device(pci_address: str):
    """(pynvml, the device handle), NVML initialized for the call."""
    import pynvml
    address = naming.normalize_pci_address(pci_address)
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlCallFailed(exc.value) from None
    try:
        yield pynvml, pynvml.nvmlDeviceGetHandleByPciBusId(address)
    except pynvml.NVMLError as exc:
        raise NvmlCallFailed(exc.value) from None
    finally:
        pynvml.nvmlShutdown()


def _int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError('%s must be a non-negative integer, not %r' % (
            name, value))
    return value


@privsep.sys_admin_pctxt.entrypoint
def set_mig_mode(pci_address: str, enable: bool) -> int:
    """Set MIG mode; returns NVML's activation status.

    ``NVML_SUCCESS``, or why the new mode waits for a GPU reset
    (``NVML_ERROR_IN_USE``, ``NVML_ERROR_RESET_REQUIRED``).
    """
    with _device(pci_address) as (nvml, handle):
        return nvml.nvmlDeviceSetMigMode(
            handle, nvml.NVML_DEVICE_MIG_ENABLE if enable
            else nvml.NVML_DEVICE_MIG_DISABLE)


@privsep.sys_admin_pctxt.entrypoint
def create_gpu_instance(pci_address: str, profile_id: int, start: int,
                        size: int) -> int:
    """Create a GPU instance of the driver's ``profile_id`` at ``start``.

    ``size``: its memory slices.  Returns the new instance's id.
    """
    profile_id, start, size = (_int('profile_id', profile_id),
                               _int('start', start), _int('size', size))
    with _device(pci_address) as (nvml, handle):
        placement = nvml.c_nvmlGpuInstancePlacement_t(start, size)
        gi = nvml.nvmlDeviceCreateGpuInstanceWithPlacement(
            handle, profile_id, ctypes.byref(placement))
        return nvml.nvmlGpuInstanceGetInfo(gi).id


@privsep.sys_admin_pctxt.entrypoint
def destroy_gpu_instance(pci_address: str, gpu_instance_id: int) -> None:
    """Destroy the GPU instance the driver numbers ``gpu_instance_id``."""
    gpu_instance_id = _int('gpu_instance_id', gpu_instance_id)
    with _device(pci_address) as (nvml, handle):
        nvml.nvmlGpuInstanceDestroy(
            nvml.nvmlDeviceGetGpuInstanceById(handle, gpu_instance_id))


@privsep.sys_admin_pctxt.entrypoint
def set_power_limit(pci_address: str, milliwatts: int) -> None:
    """NVML's power-management limit of a GPU, in milliwatts."""
    milliwatts = _int('milliwatts', milliwatts)
    with _device(pci_address) as (nvml, handle):
        nvml.nvmlDeviceSetPowerManagementLimit(handle, milliwatts)


def hwmon_attribute(sysfs_root: str, pci_address: str, name: str) -> str:
    """The path of a GPU's hwmon attribute, refused unless confined.

    ``sysfs_root`` comes from the unprivileged agent (``[agent]
    sysfs_root``), so the daemon writes only a file ``name`` of a
    ``hwmonN`` directory of the GPU that resolves inside that root and
    whose every directory from the root down belongs to the user the
    daemon runs as: a tree (or a symbolic link) the agent's user made
    points nowhere.
    """
    if name not in SYSFS_ATTRIBUTES:
        raise RefusedWrite('%s is not a sysfs attribute the agent sets' %
                           name)
    address = naming.normalize_pci_address(pci_address)
    root = os.path.realpath(sysfs_root)
    found = sorted(glob.glob(os.path.join(
        root, 'bus', 'pci', 'devices', address, 'hwmon', 'hwmon*', name)))
    if not found:
        raise RefusedWrite('GPU %s has no hwmon %s under %s' % (
            address, name, sysfs_root))
    path = os.path.realpath(found[0])
    if (os.path.basename(path) != name or
            not path.startswith(root + os.sep)):
        raise RefusedWrite('%s resolves outside %s' % (found[0], root))
    owner = os.geteuid()
    directory = os.path.dirname(path)
    while True:
        if os.lstat(directory).st_uid not in (owner, 0):
            raise RefusedWrite('%s belongs to another user (uid %d)' % (
                directory, os.lstat(directory).st_uid))
        if directory == root:
            return path
        directory = os.path.dirname(directory)


@privsep.sys_admin_pctxt.entrypoint
def set_hwmon_power_cap(sysfs_root: str, pci_address: str,
                        microwatts: int) -> None:
    """amdgpu's hwmon ``power1_cap`` of a GPU, in microwatts."""
    microwatts = _int('microwatts', microwatts)
    path = hwmon_attribute(sysfs_root, pci_address, 'power1_cap')
    with open(path, 'w') as f:
        f.write('%d\n' % microwatts)
