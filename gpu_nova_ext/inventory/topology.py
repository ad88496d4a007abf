# SPDX-License-Identifier: Apache-2.0

"""GPU topology of one host: link domains and the GPU-to-GPU relation.

Pure functions over merged :class:`base.Gpu` records (design doc:
Topology).  The sources fill, per GPU, ``numa_node`` and ``pci_switch``
(libvirt's node-device parents, sysfs's PCI path) and ``nvlink_peers``
(NVML: peer PCI address -> active links; a peer is a GPU or an
NVSwitch) or ``xgmi_hive`` (amdgpu's sysfs: the GPUs of one xGMI hive are
linked).  From those:

* :func:`assign_link_domains` sets every GPU's ``link_domain``: its
  connected component over links (GPU-GPU and GPU-NVSwitch links, so the
  GPUs of one NVSwitch fabric are one domain), named by the lowest GPU PCI
  address in it; None for a GPU without an active link;
* :func:`relation` is what ``nvidia-smi topo -m`` prints for two GPUs, as
  far as the data goes: ``X`` (itself), ``NV#`` (# links, directly or
  through shared NVSwitches), ``XGMI`` (one xGMI hive), ``PIX`` (behind
  the same PCIe switch), ``NODE`` (same NUMA node), ``SYS`` (different
  NUMA nodes), None (unknown: a NUMA node is missing);
* :func:`matrix` the whole table, GPUs in PCI address order.
"""
from collections.abc import Sequence

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import recognition


def switch_above(port_class: int | None,
                 upstream: str | None) -> str | None:
    """The PCIe switch a device sits behind, from its parent and grandparent.

    When the device's parent (the port) is a bridge and the port's own
    parent is a PCI device, the port is a switch's downstream port and
    that device (``upstream``, its PCI address) the switch's upstream
    port.  None below a root port, whose parent is the host bridge.
    """
    if port_class != recognition.BRIDGE_CLASS:
        return None
    return upstream


SELF = 'X'
SAME_HIVE = 'XGMI'
SAME_SWITCH = 'PIX'
SAME_NODE = 'NODE'
OTHER_NODE = 'SYS'


def link_domains(gpus: Sequence[base.Gpu]) -> dict[str, str | None]:
    """GPU address -> its link domain (see the module doc)."""
    parent: dict[str, str] = {}

    def find(node: str) -> str:
        root = node
        while parent.setdefault(root, root) != root:
            root = parent[root]
        while node != root:           # path compression
            parent[node], node = root, parent[node]
        return root

    for gpu in gpus:
        for peer, links in gpu.nvlink_peers.items():
            if links > 0:
                parent[find(gpu.pci_address)] = find(peer)
        if gpu.xgmi_hive is not None:
            parent[find(gpu.pci_address)] = find('xgmi:' + gpu.xgmi_hive)
    lowest: dict[str, str] = {}
    for address in sorted(g.pci_address for g in gpus):
        if address in parent:         # linked, or the peer of a GPU
            lowest.setdefault(find(address), address)
    return {g.pci_address: (lowest.get(find(g.pci_address))
                            if g.pci_address in parent else None)
            for g in gpus}


def assign_link_domains(gpus: Sequence[base.Gpu]) -> None:
    """Set ``link_domain`` on every GPU of one host, in place."""
    domains = link_domains(gpus)
    for gpu in gpus:
        gpu.link_domain = domains[gpu.pci_address]


def nvlinks_between(a: base.Gpu, b: base.Gpu,
                    gpu_addresses: frozenset[str]) -> int:
    """Links from ``a`` to ``b``: direct, plus through shared NVSwitches.

    Through a switch, ``a`` reaches ``b`` over as many links as the fewer
    of the two have to it (what ``nvidia-smi topo -m`` counts: NV18 on an
    HGX H100, whose GPUs each have 18 links over 4 NVSwitches).
    """
    links = a.nvlink_peers.get(b.pci_address, 0)
    for peer, count in a.nvlink_peers.items():
        if peer in gpu_addresses:
            continue
        links += min(count, b.nvlink_peers.get(peer, 0))
    return links


def relation(a: base.Gpu, b: base.Gpu,
             gpu_addresses: frozenset[str] = frozenset()) -> str | None:
    """The ``nvidia-smi topo -m`` cell of ``a`` against ``b``."""
    if a.pci_address == b.pci_address:
        return SELF
    links = nvlinks_between(a, b, gpu_addresses or frozenset(
        (a.pci_address, b.pci_address)))
    if links:
        return 'NV%d' % links
    if a.xgmi_hive is not None and a.xgmi_hive == b.xgmi_hive:
        return SAME_HIVE
    if a.pci_switch is not None and a.pci_switch == b.pci_switch:
        return SAME_SWITCH
    if a.numa_node is None or b.numa_node is None:
        return None
    return SAME_NODE if a.numa_node == b.numa_node else OTHER_NODE


def matrix(gpus: Sequence[base.Gpu]) -> list[list[str | None]]:
    """``relation`` of every GPU against every other, PCI address order."""
    ordered = sorted(gpus, key=lambda g: g.pci_address)
    addresses = frozenset(g.pci_address for g in ordered)
    return [[relation(a, b, addresses) for b in ordered] for a in ordered]
