# SPDX-License-Identifier: Apache-2.0

"""Host GPU inventory + the providers that exist -> desired provider state.

Pure functions, no I/O: the reporter reads Placement, calls
:func:`translate`, diffs the result against what it read and writes only
the difference.  The ownership rules are design doc: Placement ownership:

* ``annotate`` (both modes): only ``CUSTOM_GPU_*`` traits, on the compute
  node (root) provider and on the libvirt pGPU providers nova-compute
  creates (``<nodename>_pci_0000_3b_00_0``, one per GPU or per SR-IOV VF).
  Never on PCI-in-Placement providers (``<nodename>_0000:3B:00.0``): Nova
  replaces their traits, their static traits come from the generated
  ``[pci] device_spec``.  The root gets ``CUSTOM_GPU_HOST`` and the traits
  of the GPUs that no provider represents (legacy ``pci_passthrough:alias``
  GPUs), so ``trait:CUSTOM_GPU_MODEL_...=required`` works for them too.
  It also carries the host's GPU state for the operator commands
  (:func:`host_state_traits`): ``CUSTOM_GPU_HOST_DRIVER_<BRANCH>`` per
  driver branch its GPUs run, ``CUSTOM_GPU_UNHEALTHY_<address>`` /
  ``CUSTOM_GPU_DEGRADED_<address>`` per GPU not healthy, and
  ``CUSTOM_GPU_HOST_REPORTED_<UTC minute>``, when the agent last
  confirmed them.
* ``inventory``: additionally one provider of our own per passthrough GPU
  that no Nova provider represents, ``<nodename>_gpu_<address>``, with
  ``CUSTOM_GPU_OWNER_GPU_NOVA_EXT``, the GPU's traits and one unit of
  ``CUSTOM_GPU_<MODEL>``, reserved while unhealthy or listed in
  ``[agent] reserved_gpus``.  A provider of ours whose GPU is gone is
  deleted when it holds no allocations, otherwise fully reserved.

The standard ``HW_GPU_CUDA_COMPUTE_CAPABILITY_V*`` trait (where os-traits
has one) is added next to ours; it is removed only from our own providers,
since on Nova's providers we remove nothing outside our prefix.
"""
import dataclasses
import datetime
from collections.abc import Iterable, Mapping

from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming

ANNOTATE = 'annotate'
INVENTORY = 'inventory'
MODES = (ANNOTATE, INVENTORY)

KIND_ROOT = 'root'
KIND_PGPU = 'pgpu'
KIND_OWN = 'own'

STANDARD_CUDA_PREFIX = 'HW_GPU_CUDA_COMPUTE_CAPABILITY_'
#: inventory fields we set on our own providers (and compare)
INVENTORY_FIELDS = ('total', 'reserved', 'min_unit', 'max_unit',
                    'step_size', 'allocation_ratio')


@dataclasses.dataclass
class ExistingProvider:
    """A provider of the compute node's tree as read from Placement.

    ``traits``, ``inventories`` and ``used`` are None where they were not
    read (the reporter reads only what the translation needs).
    """

    uuid: str
    name: str
    parent_uuid: str | None
    generation: int
    traits: frozenset[str] | None = None
    inventories: dict[str, dict] | None = None
    used: bool | None = None


@dataclasses.dataclass
class DesiredProvider:
    """What one provider should look like after the cycle.

    ``traits`` are the traits we want on it; for a Nova provider the
    reporter keeps every trait outside our prefix.  ``inventories`` is set
    for our own providers only (the whole inventory: we own it).
    ``uuid`` is None for a provider of ours still to create.
    """

    name: str
    kind: str
    traits: frozenset[str]
    uuid: str | None = None
    pci_address: str | None = None
    inventories: dict[str, dict] | None = None
    note: str | None = None

    @property
    def owned(self) -> bool:
        return self.kind == KIND_OWN


@dataclasses.dataclass
class Desired:
    providers: list[DesiredProvider] = dataclasses.field(
        default_factory=list)
    #: providers of ours to delete (their GPU is gone, nothing allocated)
    delete: list[ExistingProvider] = dataclasses.field(default_factory=list)
    #: PCI address -> names of the providers backed by that GPU
    gpu_providers: dict[str, list[str]] = dataclasses.field(
        default_factory=dict)
    warnings: list[str] = dataclasses.field(default_factory=list)
    #: providers of ours whose usage decides their fate: read their
    #: usages, set ``ExistingProvider.used`` and translate again
    need_usage: list[str] = dataclasses.field(default_factory=list)


def gpu_traits(gpu: base.Gpu, mode: str | None = None) -> frozenset[str]:
    """The static traits of one GPU (design doc: Placement ownership).

    ``mode`` overrides the GPU's own offering mode (a pGPU provider is a
    vGPU offer whatever discovery said).
    """
    traits = set()
    if gpu.vendor:
        traits.add(naming.vendor_trait(gpu.vendor))
    if gpu.model:
        traits.add(naming.model_trait(gpu.model))
    if gpu.memory_mib:
        traits.add(naming.memory_trait(gpu.memory_mib))
    if gpu.cuda_cc:
        traits.update(naming.cuda_cc_traits(gpu.cuda_cc))
    if gpu.driver_version:
        traits.add(naming.driver_trait(gpu.driver_version))
    mode = mode or gpu.mode
    if mode:
        traits.add(naming.mode_trait(mode))
    if gpu.mig_capable:
        traits.add(naming.MIG_CAPABLE_TRAIT)
    if gpu.mig_enabled:
        traits.add(naming.MIG_ENABLED_TRAIT)
    return frozenset(traits)


def host_state_traits(gpus: Iterable[base.Gpu],
                      current: Iterable[str] | None,
                      now: datetime.datetime) -> frozenset[str]:
    """The root provider's traits of the host's GPU state.

    Design doc: Placement ownership.  ``current`` is the root's trait set
    as read (None: unknown); its reported stamp is kept while the rest is
    unchanged and younger than :data:`naming.HOST_REPORTED_REFRESH`, so a
    cycle where nothing changed writes nothing.  No GPU: no trait.
    """
    gpus = list(gpus)
    if not gpus:
        return frozenset()
    state = {naming.host_driver_trait(g.driver_version) for g in gpus}
    state.update(t for t in (naming.gpu_health_trait(g.health.state,
                                                     g.pci_address)
                             for g in gpus) if t)
    current = frozenset(current or ())
    stamps = sorted(
        (at, t) for t in current
        if (at := naming.host_reported_at(t)) is not None)
    same = {t for t in current if naming.is_host_state(t)
            and naming.host_reported_at(t) is None} == state
    if (same and len(stamps) == 1
            and now - naming.HOST_REPORTED_REFRESH < stamps[0][0] <= now):
        stamp = stamps[0][1]
    else:
        stamp = naming.host_reported_trait(now)
    return frozenset(state | {stamp})


def own_resource_class(gpu: base.Gpu) -> str | None:
    """``CUSTOM_GPU_<MODEL>`` of a GPU, None when the model is unknown."""
    return naming.model_resource_class(gpu.model) if gpu.model else None


def own_inventory(gpu: base.Gpu, reserved: bool) -> dict[str, dict] | None:
    rc = own_resource_class(gpu)
    if rc is None:
        return None
    return {rc: _unit(reserved)}


def _unit(reserved: bool, total: int = 1) -> dict:
    return {'total': total, 'reserved': total if reserved else 0,
            'min_unit': 1, 'max_unit': total, 'step_size': 1,
            'allocation_ratio': 1.0}


def is_removable(trait: str, owned: bool) -> bool:
    """Traits we may remove: ours, plus the standard CUDA ones on ours."""
    return naming.is_ours(trait) or (
        owned and trait.startswith(STANDARD_CUDA_PREFIX))


def merge_traits(actual: Iterable[str], desired: Iterable[str],
                 owned: bool = False) -> frozenset[str]:
    """The trait set to write: keep every trait of other writers."""
    actual = frozenset(actual)
    desired = frozenset(desired)
    stale = {t for t in actual - desired if is_removable(t, owned)}
    return (actual - stale) | desired


def inventory_differs(actual: Mapping[str, dict] | None,
                      desired: Mapping[str, dict]) -> bool:
    """True when the fields we set differ (or classes were added/removed)."""
    actual = actual or {}
    if set(actual) != set(desired):
        return True
    for rc, want in desired.items():
        have = actual[rc]
        for field in INVENTORY_FIELDS:
            if field in want and have.get(field) != want[field]:
                return True
    return False


def own_provider_prefix(nodename: str) -> str:
    return naming.own_provider_name(nodename, '')


def pgpu_provider_prefix(nodename: str) -> str:
    return '%s_pci_' % nodename


def providers_to_read(nodename: str, root_uuid: str,
                      existing: Iterable[ExistingProvider]
                      ) -> tuple[set[str], set[str]]:
    """Names whose traits, and names whose inventories, the reporter reads.

    Traits: the root, every libvirt pGPU provider and every provider of
    ours under the root.  Inventories: the providers of ours.
    """
    traits, inventories = set(), set()
    own_prefix = own_provider_prefix(nodename)
    pgpu_prefix = pgpu_provider_prefix(nodename)
    for p in existing:
        if p.uuid == root_uuid:
            traits.add(p.name)
        elif p.parent_uuid == root_uuid and p.name.startswith(own_prefix):
            traits.add(p.name)
            inventories.add(p.name)
        elif p.name.startswith(pgpu_prefix):
            traits.add(p.name)
    return traits, inventories


def _is_ours(p: ExistingProvider) -> bool:
    return p.traits is not None and naming.OWNER_TRAIT in p.traits


def translate(inventory: base.HostInventory, *, nodename: str,
              root_uuid: str, existing: Iterable[ExistingProvider],
              mode: str = ANNOTATE,
              reserved_gpus: Iterable[str] = (),
              now: datetime.datetime | None = None) -> Desired:
    """Compute the desired state of this host's providers.

    :param inventory: this host's GPUs.
    :param nodename: the compute node provider's name (hypervisor
        hostname); Nova's provider names start with it.
    :param root_uuid: the compute node provider's UUID.
    :param existing: the providers of the compute node's tree.
    :param mode: ``annotate`` or ``inventory`` (``[agent] mode``).
    :param reserved_gpus: normalized PCI addresses to keep reserved
        (inventory mode).
    :param now: the UTC time of the cycle (the reported stamp); default
        the clock's.
    """
    if mode not in MODES:
        raise ValueError('unknown agent mode %r' % mode)
    reserved_gpus = set(reserved_gpus)
    existing = list(existing)
    by_name = {p.name: p for p in existing}
    out = Desired()
    root_traits = set()
    if inventory.gpus:
        root_traits.add(naming.HOST_TRAIT)

    pgpu_of: dict[str, base.Gpu] = {}
    wanted_own: set[str] = set()
    own_prefix = own_provider_prefix(nodename)
    for gpu in inventory.gpus:
        names = []
        for addr in [gpu.pci_address] + sorted(gpu.vfs):
            name = naming.pgpu_provider_name(nodename, addr)
            if name in by_name:
                pgpu_of[name] = gpu
                names.append(name)
        pci_name = naming.pci_provider_name(nodename, gpu.pci_address)
        if pci_name in by_name:
            names.append(pci_name)
        if not names and mode == INVENTORY and (
                gpu.mode == naming.MODE_PASSTHROUGH):
            own = _own_provider(gpu, nodename, by_name, reserved_gpus, out)
            if own is not None:
                wanted_own.add(own.name)
                names.append(own.name)
        if not names:
            # Nothing in Placement stands for this GPU: describe the
            # host instead (legacy pci_passthrough:alias).
            root_traits.update(gpu_traits(gpu))
        out.gpu_providers[gpu.pci_address] = names

    root = next((p for p in existing if p.uuid == root_uuid), None)
    root_traits.update(host_state_traits(
        inventory.gpus, root.traits if root else None,
        now or datetime.datetime.now(datetime.timezone.utc)))
    out.providers.append(DesiredProvider(
        name=root.name if root else nodename, kind=KIND_ROOT,
        uuid=root_uuid, traits=frozenset(root_traits)))

    pgpu_prefix = pgpu_provider_prefix(nodename)
    for p in existing:
        if p.uuid == root_uuid or not p.name.startswith(pgpu_prefix):
            continue
        gpu = pgpu_of.get(p.name)
        traits = (gpu_traits(gpu, naming.MODE_VGPU) if gpu is not None
                  else frozenset())
        out.providers.append(DesiredProvider(
            name=p.name, kind=KIND_PGPU, uuid=p.uuid, traits=traits,
            pci_address=gpu.pci_address if gpu is not None else None))

    # Providers of ours that no GPU wants any more.
    for p in existing:
        if (p.parent_uuid != root_uuid or not p.name.startswith(own_prefix)
                or p.name in wanted_own or not _is_ours(p)):
            continue
        if p.used is False:
            out.delete.append(p)
            continue
        if p.used is None:
            out.need_usage.append(p.name)
        out.warnings.append(
            '%s: its GPU is gone (or Nova reports it now) but the provider '
            'holds allocations; reserved until they are removed' % p.name)
        out.providers.append(DesiredProvider(
            name=p.name, kind=KIND_OWN, uuid=p.uuid, traits=p.traits,
            inventories={rc: _unit(True, inv.get('total', 1))
                         for rc, inv in (p.inventories or {}).items()},
            note='gone'))
    return out


def _own_provider(gpu, nodename, by_name, reserved_gpus, out):
    name = naming.own_provider_name(nodename, gpu.pci_address)
    reserved = (gpu.health.state == 'unhealthy' or
                gpu.pci_address in reserved_gpus)
    inventories = own_inventory(gpu, reserved)
    if inventories is None:
        out.warnings.append(
            '%s: GPU model unknown, cannot name its resource class; not '
            'reported' % gpu.pci_address)
        return None
    existing = by_name.get(name)
    if existing is not None and existing.traits is not None and (
            naming.OWNER_TRAIT not in existing.traits):
        out.warnings.append(
            '%s exists but is not ours (no %s); left alone'
            % (name, naming.OWNER_TRAIT))
        return None
    old_classes = set((existing.inventories or {}) if existing else ())
    if old_classes - set(inventories):
        # The model changed.  Under allocations, drain the old class and
        # hold the new one back until the old allocations are gone.
        if existing.used is None:
            out.need_usage.append(name)
        if existing.used is not False:
            (rc, unit), = inventories.items()
            for old_rc in old_classes - {rc}:
                inv = existing.inventories[old_rc]
                inventories[old_rc] = _unit(True, inv.get('total', 1))
                unit['reserved'] = unit['total']
    traits = gpu_traits(gpu, naming.MODE_PASSTHROUGH) | {naming.OWNER_TRAIT}
    desired = DesiredProvider(
        name=name, kind=KIND_OWN, traits=frozenset(traits),
        uuid=existing.uuid if existing is not None else None,
        pci_address=gpu.pci_address, inventories=inventories)
    out.providers.append(desired)
    return desired
