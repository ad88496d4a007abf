# SPDX-License-Identifier: Apache-2.0

"""Which Nova server uses which GPU: libvirt domains' host devices.

Nova names each libvirt domain with its instance UUID.  A running domain
holds a GPU through a PCI ``<hostdev>`` (passthrough of the GPU, or of an
SR-IOV VF for vendor-VFIO vGPU) or an mdev ``<hostdev>`` (mdev vGPU)::

    <hostdev mode='subsystem' type='pci' managed='yes'>
      <source><address domain='0x0000' bus='0x3b' slot='0x00'
                       function='0x0'/></source></hostdev>
    <hostdev mode='subsystem' type='mdev' model='vfio-pci'>
      <source><address uuid='c2177883-...'/></source></hostdev>

:meth:`Attribution.annotate` sets ``instance_uuid`` on a sample whose GPU
a domain holds, and on each vGPU entry whose mdev UUID (or NVML VM ID) is
a domain's, so the exporter's series name the server that uses the GPU:
something dcgm-exporter cannot do for VMs from the host.
"""
import dataclasses
import xml.etree.ElementTree as ET

from oslo_log import log as logging

from gpu_nova_ext.inventory import libvirt_source
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

#: seconds before retrying a libvirt that failed
RETRY_S = 60.0
#: seconds a reading of the domains is used (samples can come at 10 Hz;
#: a server starts in more time than this)
REFRESH_S = 5.0


@dataclasses.dataclass
class Holders:
    """Running domains by what they hold."""

    by_pci: dict[str, str] = dataclasses.field(default_factory=dict)
    by_mdev: dict[str, str] = dataclasses.field(default_factory=dict)
    domains: set[str] = dataclasses.field(default_factory=set)


def parse_domain(xml: str, holders: Holders) -> None:
    """Add one domain's PCI and mdev host devices to ``holders``."""
    root = ET.fromstring(xml)
    uuid = (root.findtext('uuid') or '').strip().lower()
    if not uuid:
        return
    holders.domains.add(uuid)
    for hostdev in root.iterfind('devices/hostdev'):
        addr = hostdev.find('source/address')
        if addr is None:
            continue
        kind = hostdev.get('type')
        if kind == 'mdev' and addr.get('uuid'):
            holders.by_mdev[addr.get('uuid').lower()] = uuid
        elif kind == 'pci':
            try:
                pci = libvirt_source.address_of(addr)
            except (TypeError, ValueError):
                continue
            holders.by_pci[pci] = uuid


class Attribution:
    """Reads the running domains of ``uri`` (every ``REFRESH_S``)."""

    def __init__(self, uri: str):
        self.uri = uri
        self._conn = None
        self._failed_at: float | None = None
        self._read_at: float | None = None
        self.holders = Holders()

    def refresh(self, now: float) -> Holders:
        if self._failed_at is not None and now - self._failed_at < RETRY_S:
            return self.holders
        if self._read_at is not None and 0 <= now - self._read_at < REFRESH_S:
            return self.holders
        try:
            import libvirt
        except ImportError:
            self._failed_at = now
            return self.holders
        holders = Holders()
        try:
            if self._conn is None:
                libvirt.registerErrorHandler(lambda ctx, err: None, None)
                self._conn = libvirt.openReadOnly(self.uri)
            for dom in self._conn.listAllDomains(
                    libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                try:
                    parse_domain(dom.XMLDesc(0), holders)
                except (libvirt.libvirtError, ET.ParseError) as exc:
                    LOG.debug('Domain %s skipped for attribution: %s',
                              dom.UUIDString(), exc)
        except libvirt.libvirtError as exc:
            if self._failed_at is None:
                LOG.warning('Servers are not attributed to GPUs: libvirt '
                            'at %s: %s (retrying every %d s)', self.uri,
                            exc.get_error_message(), RETRY_S)
            self._failed_at = now
            self.close()
            return self.holders
        self._failed_at = None
        self._read_at = now
        self.holders = holders
        return holders

    @property
    def failed(self) -> bool:
        """Whether the last reading of libvirt failed."""
        return self._failed_at is not None

    def annotate(self, samples, now: float) -> None:
        holders = self.refresh(now)
        for sample in samples:
            try:
                key = naming.normalize_pci_address(sample.pci_address)
            except ValueError:
                key = sample.pci_address
            sample.instance_uuid = holders.by_pci.get(key)
            for vgpu in sample.vgpus:
                mdev = (vgpu.get('mdev_uuid') or '').lower()
                vm = (vgpu.get('vm_id') or '').lower()
                vgpu['instance_uuid'] = (
                    holders.by_mdev.get(mdev)
                    or (vm if vm in holders.domains else None))

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: broad, closing is best effort
                pass
            self._conn = None
