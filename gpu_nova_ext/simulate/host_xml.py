# SPDX-License-Identifier: Apache-2.0

"""A libvirt test-driver host XML as the simulator reads it.

The scenario check reads each host's PCI functions (:func:`parse`) to
know its GPUs before any service starts; which functions are GPUs follows
the agent's own rule (:mod:`gpu_nova_ext.inventory.recognition`).
"""
import dataclasses
from xml.etree import ElementTree

from gpu_nova_ext.inventory import recognition


@dataclasses.dataclass
class PciFunction:
    """A PCI function of a host XML (libvirt test driver ``<device>``)."""

    address: str
    vendor_id: str
    product_id: str
    pci_class: str
    numa_node: int | None = None
    mdev_types: list[str] = dataclasses.field(default_factory=list)
    #: the physical function of an SR-IOV virtual function
    parent: str | None = None

    @property
    def is_gpu(self) -> bool:
        """A GPU by the agent's own rule (:mod:`~.inventory.recognition`)."""
        try:
            code = int(self.pci_class, 16) >> 8
        except ValueError:      # no class (or not a number): none known
            code = None
        return recognition.why_not_gpu(
            self.vendor_id, self.product_id, code,
            has_mdev_types=bool(self.mdev_types)) is None


def parse(text: str) -> list[PciFunction]:
    """The PCI functions of a libvirt test driver host XML.

    Raises ValueError (with the position) when the XML does not parse or
    is not a test driver ``<node>`` document.
    """
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        line, col = exc.position
        raise ValueError('not well-formed XML at line %d, column %d (%s)'
                         % (line, col, exc.msg if hasattr(exc, 'msg')
                            else exc))
    if root.tag != 'node':
        raise ValueError('the root element is <%s>; a libvirt test driver '
                         'host file has <node> with <device> children'
                         % root.tag)
    functions = []
    for device in root.findall('device'):
        cap = device.find("capability[@type='pci']")
        if cap is None:
            continue
        try:
            address = '%04x:%02x:%02x.%x' % tuple(
                int(cap.findtext(tag), 0)
                for tag in ('domain', 'bus', 'slot', 'function'))
        except (TypeError, ValueError):
            raise ValueError('device %s: <domain>, <bus>, <slot> and '
                             '<function> must be numbers'
                             % device.findtext('name'))
        vendor = cap.find('vendor')
        product = cap.find('product')
        numa = cap.find('numa')
        functions.append(PciFunction(
            address=address,
            vendor_id=_hex_id(vendor),
            product_id=_hex_id(product),
            pci_class=(cap.findtext('class') or '').strip(),
            numa_node=(int(numa.get('node')) if numa is not None
                       and numa.get('node') is not None else None),
            mdev_types=[t.get('id') for t in cap.findall(
                "capability[@type='mdev_types']/type")],
            parent=_phys_function(cap)))
    return functions


def _phys_function(cap) -> str | None:
    addr = cap.find("capability[@type='phys_function']/address")
    if addr is None:
        return None
    return '%04x:%02x:%02x.%x' % tuple(
        int(addr.get(k), 16) for k in ('domain', 'bus', 'slot', 'function'))


def _hex_id(element) -> str:
    if element is None or not element.get('id'):
        return ''
    return '%04x' % int(element.get('id'), 16)
