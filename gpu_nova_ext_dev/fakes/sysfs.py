# SPDX-License-Identifier: Apache-2.0

"""A sysfs tree for the ``sysfs`` inventory source (tests and tools).

The tree has the real layout: ``devices/pci0000:00/<address>/`` holds the
attributes (nested under the bridges a function sits below:
``add_bridge``, ``parent=``) and ``bus/pci/devices/<address>`` links to
it; ``driver``, ``physfn`` and ``virtfn<N>`` are symbolic links as the
kernel makes them (a board's whole PCI tree:
:meth:`gpu_nova_ext_dev.fakes.topology.Layout.build_sysfs`)::

    tree = self.useFixture(sysfs.SysfsTree())
    tree.add_gpu('0000:3d:00.0', '10de', '26b9', driver='nvidia')
    tree.add_vf('0000:3d:00.4', pf='0000:3d:00.0',
                creatable=[(1045, 'NVIDIA L40S-1B')], current=0)
    conf.set_override('sysfs_root', tree.root, 'agent')
"""
import os

import fixtures


class SysfsTree(fixtures.Fixture):
    """A temporary sysfs root with PCI functions added by the test."""

    def _setUp(self):
        self.root = self.useFixture(fixtures.TempDir()).path
        self._devices = os.path.join(self.root, 'devices', 'pci0000:00')
        self._bus = os.path.join(self.root, 'bus', 'pci', 'devices')
        self._drivers = os.path.join(self.root, 'bus', 'pci', 'drivers')
        for path in (self._devices, self._bus, self._drivers):
            os.makedirs(path)
        self._vf_count: dict[str, int] = {}
        #: address -> its directory (nested under its bridges)
        self._dirs: dict[str, str] = {}

    def _write(self, devdir: str, name: str, text: str) -> None:
        path = os.path.join(devdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text + '\n')

    def add_function(self, address: str, vendor: str, device: str,
                     klass: int = 0x030200, driver: str | None = None,
                     numa_node: int = -1,
                     subsystem: tuple[str, str] | None = None,
                     parent: str | None = None,
                     host_bridge: str | None = None) -> str:
        """One PCI function; returns its directory.

        ``subsystem`` is (subsystem vendor, subsystem device); the kernel
        writes both files for every function, the vendor's IDs by default.
        ``parent`` is the bridge (added before) the function sits below;
        without one it hangs off the host bridge ``host_bridge``
        (``pci0000:00`` by default), as a root port or an integrated
        device does.
        """
        if parent is not None:
            top = self._dirs[parent]
        elif host_bridge is not None:
            top = os.path.join(self.root, 'devices', host_bridge)
        else:
            top = self._devices
        devdir = os.path.join(top, address)
        os.makedirs(devdir)
        self._dirs[address] = devdir
        self._write(devdir, 'vendor', '0x%s' % vendor)
        self._write(devdir, 'device', '0x%s' % device)
        self._write(devdir, 'class', '0x%06x' % klass)
        sub_vendor, sub_device = subsystem or (vendor, device)
        self._write(devdir, 'subsystem_vendor', '0x%s' % sub_vendor)
        self._write(devdir, 'subsystem_device', '0x%s' % sub_device)
        self._write(devdir, 'numa_node', str(numa_node))
        os.symlink(os.path.relpath(devdir, self._bus),
                   os.path.join(self._bus, address))
        if driver:
            drvdir = os.path.join(self._drivers, driver)
            os.makedirs(drvdir, exist_ok=True)
            os.symlink(os.path.relpath(drvdir, devdir),
                       os.path.join(devdir, 'driver'))
        return devdir

    def add_bridge(self, address: str, parent: str | None = None,
                   host_bridge: str | None = None, numa_node: int = -1,
                   vendor: str = '8086', device: str = '352a') -> str:
        """A PCI bridge (class 0x0604): a root port or a switch port."""
        return self.add_function(address, vendor, device, klass=0x060400,
                                 driver='pcieport', numa_node=numa_node,
                                 parent=parent, host_bridge=host_bridge)

    def add_gpu(self, address: str, vendor: str = '10de',
                device: str = '26b9', **kwargs) -> str:
        return self.add_function(address, vendor, device, **kwargs)

    def add_vf(self, address: str, pf: str, vendor: str = '10de',
               device: str = '26b9', driver: str | None = 'nvidia',
               creatable: list[tuple[int, str]] | None = None,
               current: int | None = None, mdev_types: bool = False,
               numa_node: int = -1, klass: int = 0x030200) -> str:
        """An SR-IOV VF of ``pf`` with NVIDIA vendor VFIO attributes.

        ``creatable`` is written as the driver does (``ID : vGPU Name``
        table), ``current`` as ``nvidia/current_vgpu_type``;
        ``mdev_types`` adds an (empty) ``mdev_supported_types`` dir.
        """
        devdir = self.add_function(address, vendor, device, driver=driver,
                                   numa_node=numa_node, klass=klass)
        pfdir = self._dirs[pf]
        os.symlink(os.path.relpath(pfdir, devdir),
                   os.path.join(devdir, 'physfn'))
        index = self._vf_count.get(pf, 0)
        self._vf_count[pf] = index + 1
        os.symlink(os.path.relpath(devdir, pfdir),
                   os.path.join(pfdir, 'virtfn%d' % index))
        if creatable is not None:
            lines = ['ID    : vGPU Name']
            lines += ['%-5d : %s' % (type_id, name)
                      for type_id, name in creatable]
            self._write(devdir, 'nvidia/creatable_vgpu_types',
                        '\n'.join(lines))
        if current is not None:
            self._write(devdir, 'nvidia/current_vgpu_type', str(current))
        if mdev_types:
            os.makedirs(os.path.join(devdir, 'mdev_supported_types'))
        return devdir


#: amdgpu's hwmon temperature channels: (N, label)
AMD_TEMPS = ((1, 'edge'), (2, 'junction'), (3, 'mem'))
#: amdgpu RAS blocks with an ``<block>_err_count`` file
AMD_RAS_BLOCKS = ('umc', 'gfx', 'sdma', 'mmhub', 'xgmi_wafl')


class KernelErrors:
    """What the kernel answers to reads of chosen attributes.

    ``tree.errors.fail(path, errno.EIO)`` makes reads of that attribute
    raise ``OSError(EIO)`` as a driver returning -EIO does;
    ``fail(path, None)`` clears it.  Pass ``tree.errors.open`` as the
    sampler's opener.
    """

    def __init__(self):
        self._errors: dict[str, int] = {}

    def fail(self, path: str, code: int | None) -> None:
        if code is None:
            self._errors.pop(os.path.realpath(path), None)
        else:
            self._errors[os.path.realpath(path)] = code

    def open(self, path, *args, **kwargs):
        code = self._errors.get(os.path.realpath(path))
        if code is not None:
            raise OSError(code, os.strerror(code), path)
        return open(path, *args, **kwargs)


class GpuTree(SysfsTree):
    """A sysfs tree with amdgpu and xe GPUs whose attributes tests drive.

    ``add_amd_gpu`` writes what amdgpu writes for an Instinct board (an
    MI300X by default, class 0x120000): busy percents, VRAM, an ``amdgpu``
    hwmon with edge/junction/mem temperatures and their crit/emergency
    thresholds, power, sclk/mclk, RAS error counts, a DRM card.
    ``add_xe_gpu`` an Intel Data Center GPU Max bound to xe.
    ``set(address, name, value)`` rewrites one attribute (``hwmon/...``
    paths go to the device's hwmon), ``ras(address, block, ue, ce)`` a
    RAS count, ``unplug(address)`` removes the device as hot-unplug does.
    """

    def _setUp(self):
        super()._setUp()
        self.errors = KernelErrors()
        self._hwmon_count = 0
        #: xGMI hive id -> its ``xgmi_hive_info`` directory
        self._hives: dict[int, str] = {}
        self._cards = 0

    def _devdir(self, address: str) -> str:
        return self._dirs[address]

    def _hwmon(self, devdir: str, name: str) -> str:
        hwmon = os.path.join(devdir, 'hwmon', 'hwmon%d' % self._hwmon_count)
        self._hwmon_count += 1
        os.makedirs(hwmon)
        self._write(hwmon, 'name', name)
        return hwmon

    def _card(self, devdir: str) -> str:
        card = os.path.join(devdir, 'drm', 'card%d' % self._cards)
        self._cards += 1
        os.makedirs(card)
        return card

    def add_amd_gpu(self, address: str, device: str = '74a1',
                    klass: int = 0x120000, numa_node: int = 0,
                    vram_total_mib: int = 196592, unique_id: str =
                    '0x5f8a1c0e3a2b4d7e', xgmi_hive: int | None = None,
                    parent: str | None = None) -> str:
        """An amdgpu device; ``xgmi_hive``: the id of its xGMI hive.

        As amdgpu does, the first device of a hive holds the
        ``xgmi_hive_info`` directory (``xgmi_hive_id``, ``node<N>`` links
        to its devices) and the others link to it.
        """
        devdir = self.add_function(address, '1002', device, klass=klass,
                                   driver='amdgpu', numa_node=numa_node,
                                   parent=parent)
        if xgmi_hive is not None:
            self._join_hive(devdir, xgmi_hive)
        self._write(devdir, 'unique_id', unique_id)
        self._write(devdir, 'gpu_busy_percent', '0')
        self._write(devdir, 'mem_busy_percent', '0')
        self._write(devdir, 'mem_info_vram_total',
                    str(vram_total_mib * 1024 * 1024))
        self._write(devdir, 'mem_info_vram_used', str(300 * 1024 * 1024))
        hwmon = self._hwmon(devdir, 'amdgpu')
        for n, label in AMD_TEMPS:
            self._write(hwmon, 'temp%d_label' % n, label)
            self._write(hwmon, 'temp%d_input' % n, '40000')
            self._write(hwmon, 'temp%d_crit' % n, '100000')
            self._write(hwmon, 'temp%d_emergency' % n, '105000')
        self._write(hwmon, 'power1_average', str(120 * 10 ** 6))
        self._write(hwmon, 'power1_cap', str(750 * 10 ** 6))
        self._write(hwmon, 'power1_cap_default', str(750 * 10 ** 6))
        self._write(hwmon, 'power1_cap_min', str(0))
        self._write(hwmon, 'power1_cap_max', str(750 * 10 ** 6))
        self._write(hwmon, 'freq1_label', 'sclk')
        self._write(hwmon, 'freq1_input', str(2100 * 10 ** 6))
        self._write(hwmon, 'freq2_label', 'mclk')
        self._write(hwmon, 'freq2_input', str(1300 * 10 ** 6))
        for block in AMD_RAS_BLOCKS:
            self.ras(address, block, 0, 0)
        self._card(devdir)
        return devdir

    def _join_hive(self, devdir: str, hive_id: int) -> None:
        info = self._hives.get(hive_id)
        if info is None:
            info = os.path.join(devdir, 'xgmi_hive_info')
            self._hives[hive_id] = info
            self._write(info, 'xgmi_hive_id', str(hive_id))
        else:
            os.symlink(os.path.relpath(info, devdir),
                       os.path.join(devdir, 'xgmi_hive_info'))
        nodes = len([n for n in os.listdir(info) if n.startswith('node')])
        os.symlink(os.path.relpath(devdir, info),
                   os.path.join(info, 'node%d' % nodes))

    def add_xe_gpu(self, address: str, device: str = '0bd5',
                   numa_node: int = 0) -> str:
        devdir = self.add_function(address, '8086', device, klass=0x038000,
                                   driver='xe', numa_node=numa_node)
        hwmon = self._hwmon(devdir, 'xe')
        self._write(hwmon, 'temp2_label', 'pkg')
        self._write(hwmon, 'temp2_input', '45000')
        self._write(hwmon, 'temp3_label', 'vram')
        self._write(hwmon, 'temp3_input', '50000')
        self._write(hwmon, 'power1_max', str(600 * 10 ** 6))
        self._write(hwmon, 'energy1_input', '0')
        throttle = os.path.join(devdir, 'tile0', 'gt0', 'freq0', 'throttle')
        self._write(throttle, 'status', '0')
        self._write(throttle, 'reason_thermal', '0')
        self._card(devdir)
        return devdir

    def path(self, address: str, name: str) -> str:
        devdir = self._devdir(address)
        if name.startswith('hwmon/'):
            hwmons = sorted(os.listdir(os.path.join(devdir, 'hwmon')))
            return os.path.join(devdir, 'hwmon', hwmons[0], name[6:])
        return os.path.join(devdir, name)

    def set(self, address: str, name: str, value) -> None:
        path = self.path(address, name)
        self._write(os.path.dirname(path), os.path.basename(path),
                    str(value))

    def ras(self, address: str, block: str, ue: int, ce: int) -> None:
        self._write(os.path.join(self._devdir(address), 'ras'),
                    '%s_err_count' % block, 'ue: %d\nce: %d' % (ue, ce))

    def unplug(self, address: str) -> None:
        import shutil
        shutil.rmtree(self._devdir(address))
        os.unlink(os.path.join(self._bus, address))
        del self._dirs[address]
