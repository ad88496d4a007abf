# SPDX-License-Identifier: Apache-2.0

"""The host GPU inventory records and the inventory source contract.

Sources (libvirt, NVML, sysfs, simulated) each report what they know about
the GPUs of this host, keyed by normalized PCI address; the merge joins
them into one :class:`HostInventory`.  These records are the shared
language of discovery, the Placement translation, the state payload and
the simulator.  Code that nova-scheduler or nova-api loads never imports
this package.
"""
import abc
import dataclasses
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class MdevType:
    """A mediated device type offered by a parent device (GPU or VF)."""

    id: str                       # e.g. nvidia-471
    name: str | None = None       # e.g. A100D-10C
    device_api: str | None = None  # e.g. vfio-pci
    available: int = 0            # available instances now
    max: int | None = None        # instances when none is used
    parent: str | None = None     # PCI address of the parent device
    framebuffer_mib: int | None = None


@dataclasses.dataclass
class Mdev:
    """An existing mediated device."""

    uuid: str
    type_id: str
    parent: str


@dataclasses.dataclass
class Health:
    state: str = 'healthy'        # healthy | degraded | unhealthy
    reasons: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Gpu:
    """One physical GPU (a PCI physical function) and what it offers."""

    pci_address: str
    vendor: str | None = None              # nvidia | amd | intel
    vendor_id: str | None = None           # '10de'
    product_id: str | None = None          # '20b5'
    product_name: str | None = None        # libvirt/NVML product string
    subsystem_vendor_id: str | None = None  # sysfs: '10de'
    subsystem_device_id: str | None = None  # sysfs: '14a9' (an A16)
    model: str | None = None               # normalized, e.g. A100_80GB_PCIE
    memory_mib: int | None = None
    uuid: str | None = None
    serial: str | None = None
    numa_node: int | None = None
    # Topology (design doc: Topology; :mod:`topology`): the PCI address of
    # the upstream port of the nearest PCIe switch above the GPU (None:
    # below a root port, or unknown); NVLink peers (a GPU or an NVSwitch)
    # -> active links to it; the link domain (the lowest GPU address of
    # the GPU's connected component over links; None: no active link).
    pci_switch: str | None = None
    nvlink_peers: dict[str, int] = dataclasses.field(default_factory=dict)
    # AMD: the xGMI hive id (sysfs ``xgmi_hive_info/xgmi_hive_id``); the
    # GPUs of one hive are linked (one link domain).
    xgmi_hive: str | None = None
    link_domain: str | None = None
    iommu_group: int | None = None
    kernel_driver: str | None = None       # bound driver: nvidia, vfio-pci
    driver_version: str | None = None      # NVIDIA driver, e.g. 550.54.15
    cuda_driver_version: str | None = None
    cuda_cc: str | None = None             # '8.0'
    vfs: list[str] = dataclasses.field(default_factory=list)
    mdev_types: list[MdevType] = dataclasses.field(default_factory=list)
    mdevs: list[Mdev] = dataclasses.field(default_factory=list)
    # NVML's supported vGPU types (framebuffer, max instances).
    vgpu_types: list[MdevType] = dataclasses.field(default_factory=list)
    # NVIDIA vendor-specific VFIO vGPU types creatable on the VFs (sysfs).
    vfio_vgpu_types: list[MdevType] = dataclasses.field(default_factory=list)
    # VF address -> the vendor VFIO vGPU type set on it (current_vgpu_type).
    vfio_current_types: dict[str, str] = dataclasses.field(
        default_factory=dict)
    mig_capable: bool | None = None
    mig_enabled: bool | None = None
    mig_pending: bool | None = None
    mode: str | None = None                # see naming.MODES
    offered_vgpu_type: str | None = None
    slowdown_temperature_c: float | None = None
    shutdown_temperature_c: float | None = None
    power_limit_w: float | None = None
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    health: Health = dataclasses.field(default_factory=Health)
    # Filled by the Placement reporter: providers backed by this GPU.
    provider_uuids: list[str] = dataclasses.field(default_factory=list)
    sources: list[str] = dataclasses.field(default_factory=list)
    # Filled by the Placement reporter for a ``passthrough`` GPU: True when
    # a provider standing for it holds allocations, False when none does,
    # None when unknown (no provider, Placement unreachable) and for the
    # vGPU modes (their capacity is in ``vgpu_types``); to_state() leaves
    # the optional key out then.
    assigned: bool | None = None
    # Filled by the Placement reporter: the project whose reservation trait
    # (``CUSTOM_GPU_RESERVED_<project>``) its providers carry, or None.
    reserved_for: str | None = None
    # Filled by the agent's power policy: the ``[power] profiles`` profile
    # applied to this GPU, or None (no profile, or not applied).
    power_profile: str | None = None

    def to_state(self) -> dict[str, Any]:
        """The GPU object of the state payload (design doc: State protocol)."""
        metrics = dict(self.metrics)
        if self.slowdown_temperature_c is not None:
            metrics.setdefault('slowdown_temperature_c',
                               self.slowdown_temperature_c)
        if self.power_limit_w is not None:
            metrics.setdefault('power_limit_w', self.power_limit_w)
        state = {
            'pci_address': self.pci_address,
            'vfs': list(self.vfs),
            'provider_uuids': list(self.provider_uuids),
            'vendor': self.vendor,
            'model': self.model,
            'memory_mib': self.memory_mib,
            'uuid': self.uuid,
            'numa_node': self.numa_node,
            'mode': self.mode,
            'offered_vgpu_type': self.offered_vgpu_type,
            'driver_version': self.driver_version,
            'cuda_cc': self.cuda_cc,
            'vgpu_types': [
                {'id': t.id, 'name': t.name,
                 'framebuffer_mib': t.framebuffer_mib,
                 'available': t.available, 'max': t.max}
                for t in self.merged_vgpu_types()],
            'mig': {'capable': self.mig_capable,
                    'enabled': self.mig_enabled},
            'health': {'state': self.health.state,
                       'reasons': list(self.health.reasons)},
        }
        if self.assigned is not None:
            # the payload's optional "assigned" (absent means unknown)
            state['assigned'] = self.assigned
        if self.reserved_for is not None:
            # optional: only reserved GPUs carry it
            state['reserved_for'] = self.reserved_for
        if self.power_profile is not None:
            # optional: only GPUs under a power profile carry it
            state['power_profile'] = self.power_profile
        # Topology, compact (design doc: Topology): the domain and switch
        # only, no peer lists; optional, absent means none or unknown.
        if self.link_domain is not None:
            state['link_domain'] = self.link_domain
        if self.pci_switch is not None:
            state['pci_switch'] = self.pci_switch
        # last: the scheduler's cache takes it out and back fastest there
        state['metrics'] = metrics
        return state

    def merged_vgpu_types(self) -> list[MdevType]:
        """The vGPU types this GPU offers, one per type id.

        The types of the GPU's mode: libvirt's mdev types (on the GPU or
        summed over its SR-IOV VFs), else the vendor VFIO types on its VFs,
        else NVML's supported types; none for a ``passthrough`` GPU.
        libvirt and sysfs know availability, NVML the framebuffer and the
        maximum per GPU: they are joined by type id (or name).  Without
        NVML the framebuffer comes from the type name (``A100D-10C`` is
        10 GiB) and the maximum is what is available plus what exists
        (None for a type while another type holds the GPU).
        """
        if self.mode == naming.MODE_PASSTHROUGH:
            return []
        nvml = {}
        for t in self.vgpu_types:
            nvml[t.id] = t
            if t.name:
                nvml.setdefault(t.name, t)
        raw = self.mdev_types or self.vfio_vgpu_types
        if not raw:
            return [dataclasses.replace(t) for t in self.vgpu_types]
        used: dict[str, int] = {}
        existing = ([m.type_id for m in self.mdevs] if self.mdev_types
                    else list(self.vfio_current_types.values()))
        for type_id in existing:
            used[type_id] = used.get(type_id, 0) + 1
        grouped: dict[str, list[MdevType]] = {}
        for t in raw:
            grouped.setdefault(t.id, []).append(t)
        out = []
        for type_id, parts in grouped.items():
            first = parts[0]
            nv = nvml.get(type_id) or (first.name and nvml.get(first.name))
            name = first.name or (nv.name if nv else None)
            available = sum(t.available or 0 for t in parts)
            if nv is not None and nv.max is not None:
                max_ = nv.max
            elif all(t.max is not None for t in parts):
                max_ = sum(t.max for t in parts)
            elif used.get(type_id) or not used:
                # In use (or nothing is): what is left plus what exists.
                max_ = available + used.get(type_id, 0)
            else:
                # Another type holds the GPU: its maximum is unknown.
                max_ = None
            if max_ is not None:
                # SR-IOV VFs each list one instance of every type; the GPU
                # holds no more than its maximum.
                available = max(0, min(available,
                                       max_ - used.get(type_id, 0)))
            framebuffer = (first.framebuffer_mib
                           or (nv.framebuffer_mib if nv else None)
                           or naming.vgpu_type_framebuffer_mib(name))
            out.append(MdevType(
                id=type_id, name=name, device_api=first.device_api,
                available=available, max=max_,
                parent=self.pci_address, framebuffer_mib=framebuffer))
        return out

    def _merged_vgpu_types(self, types=None):
        # Kept for callers of the first draft; see merged_vgpu_types().
        return self.merged_vgpu_types()


@dataclasses.dataclass
class HostInventory:
    host: str
    gpus: list[Gpu] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: GPU-vendor PCI functions not offered, and why (INFO lines)
    notes: list[str] = dataclasses.field(default_factory=list)

    def gpu(self, pci_address: str) -> Gpu | None:
        for gpu in self.gpus:
            if gpu.pci_address == pci_address:
                return gpu
        return None

    def to_dict(self) -> dict[str, Any]:
        """``discover --format json``: ``{"host": ..., "gpus": [...]}``."""
        return {'host': self.host,
                'gpus': [g.to_state() for g in self.gpus]}


_LOGGED: set[str] = set()


def log_once(msg: str, *args: Any) -> str:
    """Log ``msg % args`` at WARNING the first time, then at DEBUG.

    Discovery runs every agent cycle: the same skipped device would
    otherwise fill the log with one identical line every cycle.
    Returns the formatted message.
    """
    text = msg % args if args else msg
    if text in _LOGGED:
        LOG.debug(msg, *args)
    else:
        if len(_LOGGED) > 10000:
            _LOGGED.clear()
        _LOGGED.add(text)
        LOG.warning(msg, *args)
    return text


class InventorySource(abc.ABC):
    """Contract of a ``gpu_nova_ext.inventory.sources`` plugin.

    A source is built with the agent's ConfigOpts and reports partial
    :class:`Gpu` records keyed by normalized PCI address; the merge joins
    the reports of all configured sources in their configured order (a
    later source fills fields an earlier one left empty; ``metrics`` are
    updated in source order; ``health`` is the worst state any source
    reports, with all reasons).  Lists of a record (``mdev_types``,
    ``mdevs``, ``vfs``) hold every entry: ``mdev_types`` has one entry per
    parent (the GPU or each of its VFs) and type, with ``parent`` set.
    """

    #: entry point name, e.g. ``libvirt``
    name: str = ''

    def __init__(self, conf):
        self.conf = conf
        #: one line per device skipped or degraded in the last discover()
        self.warnings: list[str] = []
        #: INFO lines of the last discover(): devices not offered, why
        self.notes: list[str] = []

    def warn(self, msg: str, *args: Any) -> None:
        """Log one warning naming a device and keep it for the inventory."""
        self.warnings.append(log_once(msg, *args))

    def note(self, msg: str, *args: Any) -> None:
        """Log one INFO line (every discovery) and keep it."""
        LOG.info(msg, *args)
        self.notes.append(msg % args if args else msg)

    @abc.abstractmethod
    def discover(self) -> dict[str, Gpu]:
        """Return what this source knows, by PCI address.

        A source that cannot run at all (library missing, driver not
        loaded) returns an empty dict and logs one warning; a source that
        was explicitly asked for and whose service is unreachable raises
        a typed exception from :mod:`gpu_nova_ext.exception`.
        """

    def close(self) -> None:
        """Release connections; the default holds none."""
