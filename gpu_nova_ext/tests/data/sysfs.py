"""Build a sysfs tree for the ``sysfs`` inventory source (test code).

The tree has the real layout: ``devices/pci0000:00/<address>/`` holds the
attributes and ``bus/pci/devices/<address>`` links to it; ``driver``,
``physfn`` and ``virtfn<N>`` are symbolic links as the kernel makes them::

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

    def _write(self, devdir: str, name: str, text: str) -> None:
        path = os.path.join(devdir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'w') as f:
            f.write(text + '\n')

    def add_function(self, address: str, vendor: str, device: str,
                     klass: int = 0x030200, driver: str | None = None,
                     numa_node: int = -1,
                     subsystem: tuple[str, str] | None = None) -> str:
        """One PCI function; returns its directory.

        ``subsystem`` is (subsystem vendor, subsystem device); the kernel
        writes both files for every function, the vendor's IDs by default.
        """
        devdir = os.path.join(self._devices, address)
        os.makedirs(devdir)
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
        pfdir = os.path.join(self._devices, pf)
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
