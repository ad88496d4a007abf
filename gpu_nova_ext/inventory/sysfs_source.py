# SPDX-License-Identifier: Apache-2.0

"""The ``sysfs`` inventory source: NVIDIA vendor-specific VFIO vGPU.

Newer NVIDIA vGPU drivers (Hopper/Blackwell with the vendor-specific VFIO
framework) no longer register mdev types: each SR-IOV virtual function of
the GPU gets ``nvidia/creatable_vgpu_types`` (a table ``ID : vGPU Name``)
and ``nvidia/current_vgpu_type`` (0, or the type the operator set), and
Nova offers those VFs as PCI passthrough devices.  This source reads, under
``[agent] sysfs_root`` (``/sys``; tests build their own tree):

``bus/pci/devices/<address>/``
    ``class``, ``vendor``, ``device``, ``subsystem_vendor``,
    ``subsystem_device``, ``numa_node``, the ``driver`` link,
    ``virtfn<N>`` links (on a physical function), ``physfn`` (on a VF),
    ``nvidia/creatable_vgpu_types``, ``nvidia/current_vgpu_type`` and
    ``mdev_supported_types/`` (whose presence means mdev-based vGPU);
    the link itself, whose target's path names the bridges above the
    device (``pci_switch``), and amdgpu's
    ``xgmi_hive_info/xgmi_hive_id`` (``xgmi_hive``; design doc:
    Topology).

It reports every GPU physical function it finds (:mod:`recognition`'s
rule, accelerator class 0x1200 included; bound driver, NUMA node, VFs,
subsystem ID) and, for GPUs whose VFs list creatable types and have no
mdev types, ``vfio_vgpu_types`` (one entry per VF and type, ``parent``
the VF) and the types already set on VFs (``vfio_current_types``).
"""
import os
import re

from oslo_log import log as logging

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import libvirt_source
from gpu_nova_ext.inventory import topology
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

_TYPE_LINE = re.compile(r'^\s*(\d+)\s*:\s*(.*?)\s*$')


def _read(path: str) -> str | None:
    try:
        with open(path, encoding='utf-8', errors='replace') as f:
            return f.read().strip()
    except OSError:
        return None


def _link_name(path: str) -> str | None:
    try:
        return os.path.basename(os.readlink(path))
    except OSError:
        return None


def pci_switch(devdir: str) -> str | None:
    """The upstream port of the PCIe switch above a device.

    ``devdir`` resolves to the device's place in the PCI tree
    (``.../pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:3b:00.0``):
    its parent directory is the port, the grandparent the port's parent
    (``pciDDDD:BB``, no PCI device, above a root port).
    :func:`topology.switch_above`'s rule; None when the path says nothing
    (design doc: Topology).
    """
    port_dir = os.path.dirname(os.path.realpath(devdir))
    try:
        naming.normalize_pci_address(os.path.basename(port_dir))
        upstream = naming.normalize_pci_address(
            os.path.basename(os.path.dirname(port_dir)))
        port_class = int(_read(os.path.join(port_dir, 'class')) or '',
                         16) >> 8
    except ValueError:
        return None        # below a root port, not a PCI path, no class
    return topology.switch_above(port_class, upstream)


def xgmi_hive(devdir: str) -> str | None:
    """amdgpu's xGMI hive id of a device, or None (no hive, not amdgpu).

    amdgpu gives the first device of a hive an ``xgmi_hive_info``
    directory and the others a link to it; its ``xgmi_hive_id`` is the
    hive's 64-bit id in decimal (design doc: Topology).
    """
    text = _read(os.path.join(devdir, 'xgmi_hive_info', 'xgmi_hive_id'))
    if not text or not text.isdigit() or int(text) == 0:
        return None
    return '%x' % int(text)


def parse_creatable_types(text: str) -> list[tuple[int, str]]:
    """``creatable_vgpu_types`` content -> [(type id, name)]."""
    types = []
    for line in text.splitlines():
        m = _TYPE_LINE.match(line)
        if m:
            types.append((int(m.group(1)), m.group(2)))
    return types


class SysfsVfioSource(base.InventorySource):
    """GPUs and vendor-VFIO vGPU types from sysfs at ``[agent] sysfs_root``.

    A missing tree (no ``bus/pci/devices``) is an empty report.
    """

    name = 'sysfs'

    def __init__(self, conf, sysfs_root: str | None = None):
        super().__init__(conf)
        self.root = sysfs_root or conf.agent.sysfs_root
        self.extra_ids = frozenset(
            i.strip().lower().replace('0x', '')
            for i in conf.agent.extra_gpu_pci_ids if i.strip())

    def _function(self, devdir: str, address: str):
        klass = _read(os.path.join(devdir, 'class'))
        vendor = _read(os.path.join(devdir, 'vendor'))
        device = _read(os.path.join(devdir, 'device'))
        if not klass or not vendor or not device:
            return None
        try:
            dev = libvirt_source.NodeDevice(
                name=address, kind='pci', address=address,
                class_code=int(klass, 16) >> 8,
                vendor_id='%04x' % int(vendor, 16),
                product_id='%04x' % int(device, 16))
        except ValueError:
            self.warn('Skipping PCI device %s in sysfs: unreadable '
                      'class/vendor/device (%r, %r, %r).', address, klass,
                      vendor, device)
            return None
        numa = _read(os.path.join(devdir, 'numa_node'))
        if numa and numa.lstrip('-').isdigit() and int(numa) >= 0:
            dev.numa_node = int(numa)
        dev.driver = _link_name(os.path.join(devdir, 'driver'))
        dev.phys_function = _link_name(os.path.join(devdir, 'physfn'))
        return dev

    @staticmethod
    def _subsystem(devdir: str) -> tuple[str | None, str | None]:
        ids = []
        for name in ('subsystem_vendor', 'subsystem_device'):
            value = _read(os.path.join(devdir, name))
            try:
                ids.append('%04x' % int(value, 16) if value else None)
            except ValueError:
                ids.append(None)
        return ids[0], ids[1]

    def _note(self, msg, *args) -> None:
        # libvirt, when it runs too, says the same about the same devices
        if 'libvirt' in self.conf.agent.inventory_sources:
            LOG.debug(msg, *args)
        else:
            self.note(msg, *args)

    def discover(self) -> dict[str, base.Gpu]:
        devices_dir = os.path.join(self.root, 'bus', 'pci', 'devices')
        try:
            entries = sorted(os.listdir(devices_dir))
        except OSError:
            LOG.debug('No PCI devices under %s', devices_dir)
            return {}
        gpus: dict[str, base.Gpu] = {}
        vfs = []
        not_gpus = []
        for entry in entries:
            try:
                address = naming.normalize_pci_address(entry)
            except ValueError:
                continue
            devdir = os.path.join(devices_dir, entry)
            dev = self._function(devdir, address)
            if dev is None:
                continue
            if dev.phys_function:
                vfs.append((dev, devdir))   # a VF of a GPU is the GPU's
                continue
            if os.path.isdir(os.path.join(devdir, 'mdev_supported_types')):
                dev.mdev_types = [base.MdevType(id='')]   # evidence only
            if not libvirt_source.is_gpu(dev, self.extra_ids):
                not_gpus.append(dev)
                continue
            vf_links = sorted(
                (n for n in os.listdir(devdir) if n.startswith('virtfn')),
                key=lambda n: int(n[6:]) if n[6:].isdigit() else 0)
            vf_addrs = []
            for link in vf_links:
                target = _link_name(os.path.join(devdir, link))
                try:
                    vf_addrs.append(naming.normalize_pci_address(target))
                except (TypeError, ValueError):
                    self.warn('Ignoring %s of GPU %s: %r is not a PCI '
                              'address.', link, address, target)
            sub_vendor, sub_device = self._subsystem(devdir)
            gpus[address] = base.Gpu(
                pci_address=address,
                vendor=naming.VENDOR_IDS.get(dev.vendor_id),
                vendor_id=dev.vendor_id, product_id=dev.product_id,
                subsystem_vendor_id=sub_vendor,
                subsystem_device_id=sub_device,
                numa_node=dev.numa_node, kernel_driver=dev.driver,
                pci_switch=pci_switch(devdir),
                xgmi_hive=xgmi_hive(devdir),
                vfs=sorted(vf_addrs), sources=[self.name])
        for dev, devdir in vfs:
            if not self._add_vf(gpus, dev, devdir):
                not_gpus.append(dev)
        libvirt_source.report_not_gpus(not_gpus, self.extra_ids, self.warn,
                                       self._note)
        return gpus

    def _add_vf(self, gpus, dev, devdir) -> bool:
        """Fold a VF into its GPU; False when its PF is no GPU."""
        try:
            pf_addr = naming.normalize_pci_address(dev.phys_function)
        except ValueError:
            return False
        gpu = gpus.get(pf_addr)
        if gpu is None:
            return False
        if dev.address not in gpu.vfs:
            gpu.vfs.append(dev.address)
            gpu.vfs.sort()
        if os.path.isdir(os.path.join(devdir, 'mdev_supported_types')):
            return True  # mdev-based vGPU: the libvirt source reports it
        creatable = _read(os.path.join(devdir, 'nvidia',
                                       'creatable_vgpu_types'))
        current = _read(os.path.join(devdir, 'nvidia', 'current_vgpu_type'))
        if creatable is None and current is None:
            return True
        for type_id, name in parse_creatable_types(creatable or ''):
            gpu.vfio_vgpu_types.append(base.MdevType(
                id=naming.nvidia_mdev_type_id(type_id),
                name=naming.vgpu_type_name(name), device_api='vfio-pci',
                available=1, max=None, parent=dev.address))
        if current and current.strip() not in ('', '0'):
            try:
                type_id = naming.nvidia_mdev_type_id(int(current))
            except ValueError:
                self.warn('Ignoring nvidia/current_vgpu_type %r of VF %s: '
                          'not a type id.', current, dev.address)
                return True
            gpu.vfio_current_types[dev.address] = type_id
        return True
