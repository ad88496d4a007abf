# SPDX-License-Identifier: Apache-2.0

"""Join the sources' reports by PCI address and classify each GPU.

Pure functions, no I/O: :func:`merge` takes ``[(source name, {address:
Gpu})]`` in configured order, :func:`classify` fills each GPU's model,
offering mode and offered vGPU type.

Merging rules (per field):

* scalars: the first source that knows a value wins (``libvirt`` before
  ``nvml`` for the NUMA node and bound driver, the only sources of VFs and
  mdev types);
* ``vfs``: the union; ``mdev_types``, ``mdevs``, ``vgpu_types``,
  ``vfio_vgpu_types``, ``nvlink_peers``: from the first source that has
  any;
* ``link_domain``: derived once all reports are merged
  (:func:`topology.assign_link_domains`, design doc: Topology);
* ``metrics``: updated in source order (the last value of a key wins);
* ``health``: the worst state any source reports, with all reasons.

When ``libvirt`` ran, it is the authority on which PCI GPUs exist: a GPU
that another source reports and libvirt does not (a typo in a simulated
file, a GPU that libvirt's test driver does not model) is dropped with a
warning, so one physical GPU is never reported twice or from nowhere.

Classification (one mode per GPU, never two):

* mdev types on the GPU or its VFs -> ``vgpu``; ``mig-vgpu`` when the
  offered type (or, with none offered, every type; or, with MIG enabled,
  any type) is MIG-backed;
* else vendor VFIO types or VFs with a type set (sysfs) -> ``vgpu-vfio``;
* else, for a GPU no PCI-level source saw (NVML or simulated only) with
  vGPU types -> ``vgpu``;
* else ``passthrough``.

The offered vGPU type: nova.conf's (:mod:`nova_config`) when it enables
any type, else the type most existing mdevs (or VFs, for vendor VFIO) of
the GPU have; None for passthrough.
"""
import collections
import dataclasses

from oslo_log import log as logging

from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext.inventory import nova_config
from gpu_nova_ext.inventory import topology
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

HEALTH_ORDER = {'healthy': 0, 'degraded': 1, 'unhealthy': 2}
_PCI_SOURCES = ('libvirt', 'sysfs')
_FIRST_NON_EMPTY = ('mdev_types', 'mdevs', 'vgpu_types', 'vfio_vgpu_types')
_SPECIAL = frozenset(('pci_address', 'vfs', 'metrics', 'health',
                      'sources', 'provider_uuids', 'vfio_current_types',
                      'nvlink_peers')
                     + _FIRST_NON_EMPTY)
_SCALARS = tuple(f.name for f in dataclasses.fields(base.Gpu)
                 if f.name not in _SPECIAL)


def _merge_into(into: base.Gpu, gpu: base.Gpu) -> None:
    for name in _SCALARS:
        if getattr(into, name) is None:
            value = getattr(gpu, name)
            if value is not None:
                setattr(into, name, value)
    for name in _FIRST_NON_EMPTY:
        if not getattr(into, name) and getattr(gpu, name):
            setattr(into, name, list(getattr(gpu, name)))
    if not into.nvlink_peers and gpu.nvlink_peers:
        into.nvlink_peers = dict(gpu.nvlink_peers)
    into.vfs = sorted(set(into.vfs) | set(gpu.vfs))
    into.metrics.update(gpu.metrics)
    for vf, type_id in gpu.vfio_current_types.items():
        into.vfio_current_types.setdefault(vf, type_id)
    if HEALTH_ORDER.get(gpu.health.state, 0) > HEALTH_ORDER.get(
            into.health.state, 0):
        into.health.state = gpu.health.state
    for reason in gpu.health.reasons:
        if reason not in into.health.reasons:
            into.health.reasons.append(reason)
    for source in gpu.sources:
        if source not in into.sources:
            into.sources.append(source)


def merge(reports: list[tuple[str, dict[str, base.Gpu]]], host: str,
          warn=LOG.warning) -> base.HostInventory:
    """Reports in source order -> one :class:`HostInventory`."""
    inventory = base.HostInventory(host=host)
    merged: dict[str, base.Gpu] = {}
    names = [name for name, _gpus in reports]
    libvirt_seen = None
    if 'libvirt' in names:
        libvirt_seen = set(dict(reports)['libvirt'])
    for source, gpus in reports:
        for address, gpu in gpus.items():
            if libvirt_seen is not None and address not in libvirt_seen:
                warn('Ignoring GPU %s reported by %s: libvirt does not '
                     'report a GPU at that PCI address.', address, source)
                continue
            if not gpu.sources:
                gpu.sources = [source]
            if address not in merged:
                merged[address] = base.Gpu(pci_address=address)
            _merge_into(merged[address], gpu)
    inventory.gpus = [merged[a] for a in sorted(merged)]
    topology.assign_link_domains(inventory.gpus)
    return inventory


def _most_common(values: list[str]) -> str | None:
    if not values:
        return None
    counts = collections.Counter(values)
    return sorted(counts, key=lambda v: (-counts[v], v))[0]


def _mode(gpu: base.Gpu, warn) -> str:
    if gpu.mdev_types:
        if gpu.vfio_vgpu_types:
            warn('GPU %s has both mdev types and vendor VFIO vGPU types; '
                 'offering it as mdev vGPU only.', gpu.pci_address)
            gpu.vfio_vgpu_types = []
            gpu.vfio_current_types = {}
        return naming.MODE_VGPU
    if gpu.vfio_vgpu_types or gpu.vfio_current_types:
        return naming.MODE_VGPU_VFIO
    if gpu.vgpu_types and not set(gpu.sources) & set(_PCI_SOURCES):
        return naming.MODE_VGPU
    return naming.MODE_PASSTHROUGH


def _type_names(gpu: base.Gpu) -> dict[str, str | None]:
    names: dict[str, str | None] = {}
    for t in gpu.vgpu_types + gpu.mdev_types:
        if t.name or t.id not in names:
            names[t.id] = t.name
    return names


def _offered(gpu: base.Gpu, nova: nova_config.NovaMdevConfig,
             warn) -> str | None:
    if gpu.mode == naming.MODE_PASSTHROUGH:
        return None
    if gpu.mode == naming.MODE_VGPU_VFIO:
        return _most_common(list(gpu.vfio_current_types.values()))
    if nova.enabled_types:
        offered = nova.type_for([gpu.pci_address] + gpu.vfs)
        known = {t.id for t in gpu.mdev_types} or {t.id for t in
                                                   gpu.vgpu_types}
        if offered is not None and known and offered not in known:
            warn('nova.conf (%s) enables vGPU type %s on GPU %s, which '
                 'does not offer it (it offers %s); no vGPU type is '
                 'offered on it.', ', '.join(nova.files) or '-', offered,
                 gpu.pci_address, ', '.join(sorted(known)))
            return None
        return offered
    return _most_common([m.type_id for m in gpu.mdevs])


def classify(inventory: base.HostInventory,
             nova: nova_config.NovaMdevConfig | None = None,
             warn=LOG.warning) -> base.HostInventory:
    """Fill vendor, model, ``mode`` and ``offered_vgpu_type`` in place."""
    nova = nova or nova_config.NovaMdevConfig()
    for gpu in inventory.gpus:
        if gpu.vendor is None and gpu.vendor_id:
            gpu.vendor = naming.VENDOR_IDS.get(gpu.vendor_id)
        if not gpu.model:
            gpu.model = (gpu_models.model_for(gpu.vendor_id, gpu.product_id,
                                           gpu.subsystem_vendor_id,
                                           gpu.subsystem_device_id)
                         or gpu_models.model_from_product(gpu.product_name))
        gpu.mode = _mode(gpu, warn)
        gpu.offered_vgpu_type = _offered(gpu, nova, warn)
        if gpu.mode == naming.MODE_VGPU and _mig_backed(gpu):
            gpu.mode = naming.MODE_MIG_VGPU
    return inventory


def _mig_backed(gpu: base.Gpu) -> bool:
    names = _type_names(gpu)
    offered_ids = [t.id for t in gpu.mdev_types] or list(names)
    if gpu.offered_vgpu_type:
        return naming.is_mig_backed_vgpu_type(
            names.get(gpu.offered_vgpu_type))
    backed = [naming.is_mig_backed_vgpu_type(names.get(i))
              for i in offered_ids]
    if not backed:
        return False
    if gpu.mig_enabled:
        return any(backed)
    return all(backed)
