# SPDX-License-Identifier: Apache-2.0

"""The ``libvirt`` inventory source: PCI GPUs, SR-IOV VFs, mdev types.

Reads libvirt's node devices (``virsh nodedev-dumpxml`` XML) once per
discovery: every PCI function and every mediated device.  Which PCI
functions are GPUs is :mod:`recognition`'s rule (display or accelerator
class of a GPU vendor, classless with GPU evidence, ``[agent]
extra_gpu_pci_ids``); every other function of a GPU vendor is named in
one INFO line per discovery, saying why.  An address outside the PCI
ranges (domain 0-0xffff, bus 0-0xff, slot 0-0x1f, function 0-7, as
Nova's ``nova.pci.devspec`` has them) skips the device with a warning
naming it.  SR-IOV virtual functions are folded into
their physical function: one :class:`Gpu` per physical GPU, with the VF
addresses in ``vfs`` and the mdev types of the GPU and of its VFs in
``mdev_types`` (``parent`` says where each is).  NICs and the BMC's VGA
(ASPEED, Matrox) are ignored; bridges only place GPUs behind PCIe
switches (``pci_switch``, through each node device's ``<parent>``).

The XML parsing is pure (:func:`parse_nodedev`, :func:`build_gpus`) so it
is tested on strings as well as through libvirt's test driver.
"""
import dataclasses
import os
import urllib.parse
import xml.etree.ElementTree as ET

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import recognition
from gpu_nova_ext.inventory import topology
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

#: (name, largest value) of the parts of a PCI address, as Nova's
#: nova.pci.devspec bounds them (MAX_DOMAIN, MAX_BUS, MAX_SLOT, MAX_FUNC)
PCI_ADDRESS_LIMITS = (('domain', 0xffff), ('bus', 0xff), ('slot', 0x1f),
                      ('function', 0x7))


@dataclasses.dataclass
class NodeDevice:
    """What one libvirt node device says, parsed."""

    name: str
    kind: str                                 # pci | mdev | other
    parent: str | None = None
    address: str | None = None                # pci: 0000:3b:00.0
    class_code: int | None = None             # pci: 0x0302 (no prog-if)
    vendor_id: str | None = None              # '10de'
    vendor_name: str | None = None
    product_id: str | None = None             # '20b5'
    product_name: str | None = None
    numa_node: int | None = None
    iommu_group: int | None = None
    driver: str | None = None
    vfs: list[str] = dataclasses.field(default_factory=list)
    phys_function: str | None = None
    mdev_types: list[base.MdevType] = dataclasses.field(default_factory=list)
    mdev_type: str | None = None              # mdev: its type id
    uuid: str | None = None                   # mdev: its UUID


def _int(text: str | None, base_: int = 10) -> int | None:
    if text is None or not text.strip():
        return None
    return int(text.strip(), base_)


def _hex_id(text: str | None) -> str | None:
    if not text:
        return None
    value = int(text.strip(), 16)
    return '%04x' % value


def pci_address(domain: int | None, bus: int | None, slot: int | None,
                function: int | None) -> str:
    """``0000:3b:00.0``; ValueError naming the part outside PCI ranges."""
    values = (domain or 0, bus, slot, function)
    for (part, limit), value in zip(PCI_ADDRESS_LIMITS, values):
        if value is None:
            raise ValueError('PCI device without %s' % part)
        if not 0 <= value <= limit:
            raise ValueError('PCI %s %d is outside 0-%d'
                             % (part, value, limit))
    return '%04x:%02x:%02x.%x' % values


def address_of(elem: ET.Element) -> str:
    """``<address domain= bus= slot= function=/>`` (hex) -> PCI address."""
    def part(name, default=None):
        text = elem.get(name, default)
        return int(text, 16) if text is not None else None
    return pci_address(part('domain', '0'), part('bus'), part('slot'),
                       part('function'))


def _parse_mdev_types(cap: ET.Element, parent: str) -> list[base.MdevType]:
    types = []
    for t in cap.findall('type'):
        type_id = t.get('id')
        if not type_id:
            raise ValueError('mdev type without id')
        available = _int(t.findtext('availableInstances')) or 0
        types.append(base.MdevType(
            id=type_id,
            name=naming.vgpu_type_name(t.findtext('name')),
            device_api=t.findtext('deviceAPI'),
            available=available,
            parent=parent))
    return types


def parse_nodedev(xml: str) -> NodeDevice:
    """One node device's XML -> :class:`NodeDevice`.

    Raises ValueError (or ``ET.ParseError``, a subclass of SyntaxError) on
    XML that is not a node device libvirt would write.
    """
    root = ET.fromstring(xml)
    if root.tag != 'device':
        raise ValueError('root element is <%s>, not <device>' % root.tag)
    name = root.findtext('name')
    if not name:
        raise ValueError('node device without <name>')
    dev = NodeDevice(name=name.strip(), kind='other',
                     parent=(root.findtext('parent') or '').strip() or None,
                     driver=(root.findtext('driver/name') or '').strip()
                     or None)
    for cap in root.findall('capability'):
        ctype = cap.get('type')
        if ctype == 'pci':
            _parse_pci(cap, dev)
        elif ctype == 'mdev':
            dev.kind = 'mdev'
            type_elem = cap.find('type')
            dev.mdev_type = type_elem.get('id') if type_elem is not None \
                else None
            if not dev.mdev_type:
                raise ValueError('mdev without <type id=...>')
            dev.uuid = (cap.findtext('uuid') or '').strip() or \
                _uuid_from_name(dev.name)
    return dev


def _parse_pci(cap: ET.Element, dev: NodeDevice) -> None:
    dev.kind = 'pci'
    domain = _int(cap.findtext('domain'))
    bus = _int(cap.findtext('bus'))
    slot = _int(cap.findtext('slot'))
    function = _int(cap.findtext('function'))
    dev.address = pci_address(domain, bus, slot, function)
    klass = _int(cap.findtext('class'), 16)
    dev.class_code = klass >> 8 if klass is not None else None
    vendor = cap.find('vendor')
    product = cap.find('product')
    if vendor is None or product is None:
        raise ValueError('PCI device without <vendor>/<product>')
    dev.vendor_id = _hex_id(vendor.get('id'))
    dev.vendor_name = (vendor.text or '').strip() or None
    dev.product_id = _hex_id(product.get('id'))
    dev.product_name = (product.text or '').strip() or None
    numa = cap.find('numa')
    if numa is not None and numa.get('node') is not None:
        node = int(numa.get('node'))
        dev.numa_node = node if node >= 0 else None
    group = cap.find('iommuGroup')
    if group is not None:
        dev.iommu_group = _int(group.get('number'))
    for sub in cap.findall('capability'):
        stype = sub.get('type')
        if stype == 'virt_functions':
            dev.vfs = [address_of(a) for a in sub.findall('address')]
        elif stype == 'phys_function':
            addr = sub.find('address')
            if addr is not None:
                dev.phys_function = address_of(addr)
        elif stype == 'mdev_types':
            dev.mdev_types = _parse_mdev_types(sub, dev.address)


def _uuid_from_name(name: str) -> str | None:
    # mdev_4b20d080_1b54_4048_85b3_a6a62d165c01[_0000_3b_00_0]
    parts = name.split('_')
    if len(parts) >= 6 and parts[0] == 'mdev':
        return '-'.join(parts[1:6])
    return None


def _parent_address(parent: str | None) -> str | None:
    if not parent:
        return None
    try:
        return naming.normalize_pci_address(parent)
    except ValueError:
        return None


def why_not_gpu(dev: NodeDevice,
                extra_ids: frozenset[str] = frozenset()) -> str | None:
    """None for a GPU (see :mod:`recognition`), else why it is not."""
    return recognition.why_not_gpu(dev.vendor_id, dev.product_id,
                                   dev.class_code, bool(dev.mdev_types),
                                   extra_ids)


def is_gpu(dev: NodeDevice, extra_ids: frozenset[str] = frozenset()) -> bool:
    """True for a PCI function :mod:`recognition` calls a GPU."""
    return why_not_gpu(dev, extra_ids) is None


def build_gpus(devices: list[NodeDevice],
               extra_ids: frozenset[str] = frozenset(),
               warn=LOG.warning, note=LOG.info) -> dict[str, base.Gpu]:
    """Parsed node devices -> one :class:`Gpu` per physical GPU.

    ``note`` gets one line per GPU-vendor function not offered (and one
    for all Intel functions of other classes: the chipset); ``warn`` one
    per device skipped for a fault.
    """
    gpus: dict[str, base.Gpu] = {}
    vfs: list[NodeDevice] = []
    mdevs: list[NodeDevice] = []
    not_gpus: list[NodeDevice] = []
    for dev in devices:
        if dev.kind == 'mdev':
            mdevs.append(dev)
            continue
        if dev.kind != 'pci':
            continue
        if dev.phys_function:
            vfs.append(dev)               # judged with its PF below
            continue
        if not is_gpu(dev, extra_ids):
            not_gpus.append(dev)
            continue
        vendor = naming.VENDOR_IDS.get(dev.vendor_id)
        if vendor is None:
            warn('PCI device %s (%s:%s, %s) is a GPU by [agent] '
                 'extra_gpu_pci_ids but its vendor is unknown: no vendor '
                 'trait.', dev.address, dev.vendor_id, dev.product_id,
                 dev.product_name)
        gpus[dev.address] = base.Gpu(
            pci_address=dev.address, vendor=vendor,
            vendor_id=dev.vendor_id, product_id=dev.product_id,
            product_name=dev.product_name, numa_node=dev.numa_node,
            iommu_group=dev.iommu_group, kernel_driver=dev.driver,
            vfs=list(dev.vfs), mdev_types=list(dev.mdev_types),
            sources=['libvirt'])
    by_name = {dev.name: dev for dev in devices if dev.kind == 'pci'}
    for dev in devices:
        if dev.address in gpus:
            gpus[dev.address].pci_switch = pci_switch(dev, by_name)
    owner: dict[str, str] = {addr: addr for addr in gpus}
    for gpu in gpus.values():
        for vf in gpu.vfs:
            owner[vf] = gpu.pci_address
    for vf in vfs:
        pf = gpus.get(vf.phys_function)
        if pf is None:
            if is_gpu(vf, extra_ids):
                warn('Ignoring SR-IOV VF %s: its physical function %s is '
                     'not a GPU libvirt reports.', vf.address,
                     vf.phys_function)
            else:
                not_gpus.append(vf)
            continue
        if vf.address not in pf.vfs:
            pf.vfs.append(vf.address)
        owner[vf.address] = pf.pci_address
        pf.mdev_types.extend(vf.mdev_types)
    report_not_gpus(not_gpus, extra_ids, warn, note)
    for mdev in mdevs:
        parent = _parent_address(mdev.parent)
        gpu_addr = owner.get(parent) if parent else None
        if gpu_addr is None:
            LOG.debug('mdev %s has parent %s, not a GPU', mdev.name,
                      mdev.parent)
            continue
        gpus[gpu_addr].mdevs.append(base.Mdev(
            uuid=mdev.uuid, type_id=mdev.mdev_type, parent=parent))
    for gpu in gpus.values():
        gpu.vfs.sort()
    return gpus


def pci_switch(dev: NodeDevice,
               by_name: dict[str, NodeDevice]) -> str | None:
    """The upstream port of the PCIe switch above ``dev``.

    Node devices name their ``<parent>``; a root port's parent is not a
    PCI device (``computer``).  :func:`topology.switch_above`'s rule; None
    when libvirt does not say (design doc: Topology).
    """
    port = by_name.get(dev.parent or '')
    if port is None:
        return None
    upstream = by_name.get(port.parent or '')
    return topology.switch_above(
        port.class_code, upstream.address if upstream is not None else None)


def report_not_gpus(devices: list[NodeDevice], extra_ids, warn,
                    note) -> None:
    """Say why each GPU-vendor function in ``devices`` is not offered."""
    chipset = []
    for dev in devices:
        reason = why_not_gpu(dev, extra_ids)
        if dev.vendor_id not in naming.VENDOR_IDS:
            if (dev.class_code in recognition.DISPLAY_CLASSES
                    and dev.class_code != recognition.VGA_CLASS):
                warn('Ignoring PCI device %s (%s): display controller of '
                     'unknown vendor %s; list %s:%s in [agent] '
                     'extra_gpu_pci_ids to treat it as a GPU.',
                     dev.address, dev.product_name or dev.name,
                     dev.vendor_id, dev.vendor_id, dev.product_id)
            continue
        if (dev.vendor_id == '8086' and dev.class_code is not None
                and dev.class_code != recognition.ACCELERATOR_CLASS):
            chipset.append((dev.address, '%s:%s' % (
                dev.vendor_id, dev.product_id), 'class 0x%04x' % (
                    dev.class_code)))
            continue
        note('PCI device %s (%s:%s, %s) of GPU vendor %s is not offered: '
             '%s; list %s:%s in [agent] extra_gpu_pci_ids if it is a GPU.',
             dev.address, dev.vendor_id, dev.product_id,
             dev.product_name or dev.name,
             naming.VENDOR_IDS[dev.vendor_id], reason, dev.vendor_id,
             dev.product_id)
    line = recognition.not_offered_line(chipset)
    if line:
        note('%s', line)


def check_test_driver_file(uri: str) -> None:
    """Say what is wrong with a ``test:///path`` host file, before libvirt.

    libvirt's own answer for an unreadable file reads like a daemon
    problem ("failed to parse xml document"), and a file that is not UTF-8
    makes libvirt-python fail with a SystemError.  ``test:///default`` is
    libvirt's built-in host, not a file.
    """
    parsed = urllib.parse.urlparse(uri)
    if parsed.scheme != 'test' or parsed.path in ('', '/default'):
        return
    path = urllib.parse.unquote(parsed.path)

    def bad(reason):
        return exception.LibvirtHostFileError(uri=uri, path=path,
                                              reason=reason)
    if not os.path.exists(path):
        raise bad('no such file')
    if not os.path.isfile(path):
        raise bad('not a regular file')
    try:
        with open(path, 'rb') as f:
            data = f.read()
    except OSError as exc:
        raise bad(exc.strerror or str(exc))
    try:
        data.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise bad('not UTF-8 text (byte %d)' % exc.start)
    try:
        ET.fromstring(data)
    except ET.ParseError as exc:
        raise bad('not well-formed XML (%s)' % exc)


class LibvirtSource(base.InventorySource):
    """PCI GPUs, VFs and mdev types from libvirt at ``[agent] libvirt_uri``.

    An unreachable libvirt raises :class:`exception.LibvirtUnavailable`.
    """

    name = 'libvirt'

    def __init__(self, conf, uri: str | None = None):
        super().__init__(conf)
        self.uri = uri or conf.agent.libvirt_uri
        self.extra_ids = frozenset(
            i.strip().lower().replace('0x', '')
            for i in conf.agent.extra_gpu_pci_ids if i.strip())
        self._conn = None

    def _connect(self):
        if self._conn is not None:
            return self._conn
        try:
            import libvirt
        except ImportError as exc:
            raise exception.LibvirtUnavailable(
                uri=self.uri, reason='libvirt-python is not installed '
                '(%s)' % exc)
        # libvirt prints every error on stderr unless told otherwise; the
        # errors reach us as exceptions anyway.
        libvirt.registerErrorHandler(lambda ctx, err: None, None)
        check_test_driver_file(self.uri)
        try:
            self._conn = libvirt.openReadOnly(self.uri)
        except libvirt.libvirtError as exc:
            raise exception.LibvirtUnavailable(
                uri=self.uri, reason=exc.get_error_message())
        except SystemError as exc:
            # libvirt-python could not decode libvirt's own error message.
            raise exception.LibvirtUnavailable(
                uri=self.uri, reason='libvirt failed (%s)' % (
                    exc.__cause__ or exc))
        return self._conn

    def list_nodedevs(self) -> list[tuple[str, str]]:
        """(name, XML) of every PCI and mdev node device."""
        import libvirt
        conn = self._connect()
        flags = (libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_PCI_DEV
                 | libvirt.VIR_CONNECT_LIST_NODE_DEVICES_CAP_MDEV)
        try:
            return [(d.name(), d.XMLDesc(0))
                    for d in conn.listAllDevices(flags)]
        except libvirt.libvirtError as exc:
            raise exception.LibvirtUnavailable(
                uri=self.uri, reason=exc.get_error_message())

    def discover(self) -> dict[str, base.Gpu]:
        devices = []
        for name, xml in self.list_nodedevs():
            try:
                devices.append(parse_nodedev(xml))
            except (ValueError, SyntaxError) as exc:
                self.warn('Skipping libvirt node device %s: malformed '
                          'node device XML (%s).', name, exc)
        return build_gpus(devices, self.extra_ids, warn=self.warn,
                          note=self.note)

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: broad, closing is best effort
                LOG.debug('Closing libvirt connection %s failed', self.uri)
            self._conn = None
