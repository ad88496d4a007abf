# SPDX-License-Identifier: Apache-2.0

"""A compute host as Nova's fakelibvirt and libvirt's test driver see it.

The one seam of Nova's functional harness and of the development cloud:
nova-compute runs on a fakelibvirt ``Connection``, and gpu-nova-agent
reads the same host through the real libvirt-python and libvirt's *test
driver*.  :func:`libvirt_test_xml` writes the fakelibvirt host's node
devices (PCI devices with their mdev types, and the mdevs nova-compute
created) into a ``test:///`` XML, so both sides see one host; :func:`gpu`
is one GPU of the agent's ``simulated`` source (its NVML facts, health
and metrics).
"""
import collections
from xml.etree import ElementTree

from nova.tests.fixtures import libvirt as fakelibvirt

# The two mdev-capable pGPUs fakelibvirt gives a host (num_mdevcap=2).
PGPU0 = '0000:81:00.0'
PGPU1 = '0000:81:01.0'

A100 = {'name': 'NVIDIA A100 80GB PCIe', 'memory_mib': 81920,
        'driver_version': '550.54.15', 'cuda_cc': '8.0'}
L4 = {'name': 'NVIDIA L4', 'memory_mib': 23034,
      'driver_version': '550.54.15', 'cuda_cc': '8.9'}
IDLE = {'utilization_pct': 5.0, 'memory_used_mib': 0, 'temperature_c': 40,
        'slowdown_temperature_c': 87, 'power_w': 60.0,
        'power_limit_w': 300.0}

# PCI classes real libvirt reports: 3D controller (datacentre GPUs), NIC
_GPU_CLASS = '0x030200'
_NIC_CLASS = '0x020000'


def gpu(model: dict, health: str = 'healthy', metrics: dict | None = None,
        **extra) -> dict:
    """One GPU of a host's simulated YAML (the simulator's ``gpus:``)."""
    facts = dict(model, health=health, metrics=dict(metrics or IDLE))
    facts.update(extra)
    return facts


def libvirt_test_xml(pci_info: fakelibvirt.HostPCIDevicesInfo,
                     mdev_info: fakelibvirt.HostMdevDevicesInfo | None = None,
                     counted: bool = False) -> str:
    """A fakelibvirt host's node devices as a libvirt test-driver XML.

    PCI devices keep fakelibvirt's XML plus the PCI class real libvirt
    reports (fakelibvirt leaves it out: 3D controller for NVIDIA devices,
    Ethernet for the rest); each mdev type's ``availableInstances`` drops
    by the mdevs of that type nova-compute created on that parent (as the
    kernel does; ``counted``: the parents' XML has already dropped), and
    those mdevs are listed too.
    """
    used: collections.Counter = collections.Counter()
    mdev_xml = []
    for name in (mdev_info.get_all_devices() if mdev_info else ()):
        xml = mdev_info.get_device_by_name(name).XMLDesc(0)
        dev = ElementTree.fromstring(xml)
        if not counted:
            used[(dev.findtext('parent'),
                  dev.find('capability/type').get('id'))] += 1
        mdev_xml.append(xml.strip())
    pci_xml = []
    for name in pci_info.get_all_devices():
        dev = ElementTree.fromstring(
            pci_info.get_device_by_name(name).XMLDesc(0))
        pci = dev.find("capability[@type='pci']")
        if pci.find('class') is None:
            cls = ElementTree.Element('class')
            vendor = pci.find('vendor').get('id').lower()
            cls.text = _GPU_CLASS if vendor == '0x10de' else _NIC_CLASS
            pci.insert(0, cls)
        for mtype in pci.findall("capability[@type='mdev_types']/type"):
            avail = mtype.find('availableInstances')
            avail.text = str(max(0, int(avail.text) -
                                 used[(name, mtype.get('id'))]))
        pci_xml.append(ElementTree.tostring(dev, encoding='unicode'))
    return '<node>\n%s\n</node>\n' % '\n'.join(pci_xml + mdev_xml)


def _nodedev_name(address: str) -> str:
    return 'pci_' + address.replace(':', '_').replace('.', '_')


def topology_test_xml(layout) -> str:
    """A board layout's PCI tree as a libvirt test-driver XML.

    ``layout`` is a :class:`gpu_nova_ext_dev.fakes.topology.Layout`: its
    root ports, PCIe switch ports, GPUs and NVSwitches become PCI node
    devices whose ``<parent>`` is the bridge above them (``computer`` for
    a root port), with their NUMA node, as real libvirt writes them.
    """
    devices = []
    for node in layout.pci_nodes():
        domain, bus, rest = node.address.split(':')
        slot, function = rest.split('.')
        parent = (_nodedev_name(node.parent) if node.parent
                  else 'computer')
        driver = ('<driver><name>%s</name></driver>' % node.driver
                  if node.driver else '')
        devices.append(
            '<device><name>%s</name><parent>%s</parent>%s'
            '<capability type="pci"><class>0x%06x</class>'
            '<domain>%d</domain><bus>%d</bus><slot>%d</slot>'
            '<function>%d</function>'
            '<product id="0x%s"/><vendor id="0x%s"/>'
            '<numa node="%d"/></capability></device>' % (
                _nodedev_name(node.address), parent, driver, node.klass,
                int(domain, 16), int(bus, 16), int(slot, 16),
                int(function, 16), node.ids[1], node.ids[0],
                node.numa_node))
    return '<node>\n%s\n</node>\n' % '\n'.join(devices)
