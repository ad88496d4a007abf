# SPDX-License-Identifier: Apache-2.0

"""Real boards' GPU topology for the fakes (test code).

A :class:`Layout` is one host's GPUs with their place in the PCI tree
(host bridge, root port, PCIe switch), NUMA node and NVLinks, and feeds
every fake the same host::

    from gpu_nova_ext_dev.fakes import topology as fake_topology

    layout = fake_topology.LAYOUTS['HGX_H100_8GPU']
    self.useFixture(fake_nvml.FakeNvml(layout.device_specs()))
    tree = self.useFixture(sysfs.SysfsTree())
    layout.build_sysfs(tree)
    xml = libvirt_hosts.topology_test_xml(layout)   # libvirt test driver

Layouts (``LAYOUTS``):

* ``HGX_H100_8GPU``, ``HGX_H200_8GPU``: 8 SXM GPUs, GPUs 0-3 on NUMA 0
  and 4-7 on NUMA 1, two GPUs per PCIe switch, 18 NVLinks each spread
  5/4/4/5 over 4 NVSwitches (the remote PCI address of a link is the
  NVSwitch's): one NVLink domain of 8;
* ``A100_PCIE_8GPU``, ``H100_NVL_8GPU``: 8 PCIe boards, the two GPUs of
  each PCIe switch joined by an NVLink bridge (12 links for A100, 18 for
  H100 NVL): four domains of 2;
* ``L40S_4GPU``: 4 L40S, each on a root port of its own, 2 per socket,
  no NVLink (NVML answers NotSupported): no domain.
"""
import dataclasses

from gpu_nova_ext_dev.fakes import nvml_boards

#: PCI IDs the fakes give the bridges and NVSwitches
ROOT_PORT_IDS = ('8086', '352a')       # Sapphire Rapids PCIe root port
SWITCH_PORT_IDS = ('1000', 'c030')     # Broadcom PEX890xx switch port
NVSWITCH_IDS = ('10de', '22a3')        # GH100 NVSwitch
NVSWITCH_CLASS = 0x068000              # bridge, other
BRIDGE_CLASS = 0x060400
GPU_CLASS = 0x030200


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class PciNode:
    """One PCI function of the layout's tree, parents first."""

    address: str
    parent: str | None        # None: on the host bridge ``host_bridge``
    host_bridge: str          # pciDDDD:BB of its root complex
    ids: tuple[str, str]      # (vendor, device)
    klass: int
    numa_node: int
    driver: str | None = None


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class GpuSlot:
    address: str
    numa_node: int
    root_port: str
    #: (upstream port, downstream port) of its PCIe switch, or None
    switch: tuple[str, str] | None
    #: the remote PCI address of each active NVLink, in link order
    nvlinks: tuple[str, ...] = ()


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class Layout:
    key: str
    profile: str                      # a fake NVML profile key
    gpus: tuple[GpuSlot, ...]
    #: (address, NUMA node) of each NVSwitch on the PCI bus
    nvswitches: tuple[tuple[str, int], ...] = ()

    @property
    def pci_ids(self) -> tuple[str, str]:
        device_id = nvml_boards.PROFILES[self.profile].pci_device_id
        return '%04x' % (device_id & 0xffff), '%04x' % (device_id >> 16)

    def device_specs(self) -> list[nvml_boards.DeviceSpec]:
        """The GPUs for :class:`gpu_nova_ext_dev.fakes.nvml.FakeNvml`."""
        return [nvml_boards.DeviceSpec(
            self.profile, pci_address=g.address, nvlinks=g.nvlinks,
            numa_node=g.numa_node,
            pci_switch=g.switch[0] if g.switch else None,
            root_port=g.root_port) for g in self.gpus]

    def pci_nodes(self) -> list[PciNode]:
        """Every PCI function: root ports, switch ports, GPUs, NVSwitches."""
        nodes: dict[str, PciNode] = {}

        def add(address, parent, ids, klass, numa, driver='pcieport'):
            if address not in nodes:
                host = 'pci%s' % address[:7] if parent is None else (
                    nodes[parent].host_bridge)
                nodes[address] = PciNode(
                    address=address, parent=parent, host_bridge=host,
                    ids=ids, klass=klass, numa_node=numa, driver=driver)

        for g in self.gpus:
            add(g.root_port, None, ROOT_PORT_IDS, BRIDGE_CLASS, g.numa_node)
            above = g.root_port
            if g.switch:
                upstream, downstream = g.switch
                add(upstream, g.root_port, SWITCH_PORT_IDS, BRIDGE_CLASS,
                    g.numa_node)
                add(downstream, upstream, SWITCH_PORT_IDS, BRIDGE_CLASS,
                    g.numa_node)
                above = downstream
            add(g.address, above, self.pci_ids, GPU_CLASS, g.numa_node,
                driver='nvidia')
        for address, numa in self.nvswitches:
            # each on a root port of the host bridge pci0000:04
            port = '0000:04:%02x.0' % (int(address[5:7], 16) - 4)
            add(port, None, ROOT_PORT_IDS, BRIDGE_CLASS, numa)
            add(address, port, NVSWITCH_IDS, NVSWITCH_CLASS, numa,
                driver='nvidia-nvswitch')
        return list(nodes.values())

    def build_sysfs(self, tree) -> None:
        """Lay the tree out in a :class:`~.sysfs.SysfsTree`."""
        for node in self.pci_nodes():
            tree.add_function(
                node.address, node.ids[0], node.ids[1], klass=node.klass,
                driver=node.driver, numa_node=node.numa_node,
                parent=node.parent, host_bridge=node.host_bridge)


def _pcie_host(key: str, profile: str, buses, link_count: int,
               per_switch: bool = True) -> Layout:
    """GPUs on ``buses``; first half NUMA 0; pairs under one switch.

    ``link_count``: NVLinks of the bridge joining each pair (0: none).
    ``per_switch`` False: every GPU on a root port of its own.
    """
    gpus = []
    for i, bus in enumerate(buses):
        numa = 0 if i < len(buses) // 2 else 1
        first = buses[i - i % 2]
        partner = buses[i + 1 - 2 * (i % 2)]
        peer = '0000:%02x:00.0' % partner
        links = (peer,) * link_count
        if per_switch:
            root = '0000:%02x:01.0' % (first - 3)
            switch = ('0000:%02x:00.0' % (first - 2),
                      '0000:%02x:%02x.0' % (first - 1, i % 2))
        else:
            root = '0000:%02x:01.0' % (bus - 1)
            switch = None
        gpus.append(GpuSlot(address='0000:%02x:00.0' % bus, numa_node=numa,
                            root_port=root, switch=switch, nvlinks=links))
    return Layout(key=key, profile=profile, gpus=tuple(gpus))


#: DGX H100's GPU buses (``nvidia-smi`` order)
HGX_BUSES = (0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf)
#: NVSwitches of an HGX H100 board, all on the first socket's PCIe
HGX_NVSWITCHES = tuple(('0000:%02x:00.0' % bus, 0)
                       for bus in (0x05, 0x06, 0x07, 0x08))
#: links of each HGX H100 GPU to each NVSwitch (18 in all)
HGX_LINKS_PER_SWITCH = (5, 4, 4, 5)


def _hgx(key: str, profile: str) -> Layout:
    base = _pcie_host(key, profile, HGX_BUSES, 0)
    links = tuple(address for (address, _numa), count in
                  zip(HGX_NVSWITCHES, HGX_LINKS_PER_SWITCH)
                  for _ in range(count))
    return dataclasses.replace(
        base, gpus=tuple(dataclasses.replace(g, nvlinks=links)
                         for g in base.gpus),
        nvswitches=HGX_NVSWITCHES)


LAYOUTS: dict[str, Layout] = {layout.key: layout for layout in (
    _hgx('HGX_H100_8GPU', 'H100_SXM5_80GB'),
    _hgx('HGX_H200_8GPU', 'H200'),
    _pcie_host('A100_PCIE_8GPU', 'A100_80GB_PCIE', HGX_BUSES, 12),
    _pcie_host('H100_NVL_8GPU', 'H100_NVL', HGX_BUSES, 18),
    _pcie_host('L40S_4GPU', 'L40S', (0x17, 0x3d, 0x9a, 0xca), 0,
               per_switch=False),
)}
