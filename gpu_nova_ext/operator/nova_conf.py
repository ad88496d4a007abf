# SPDX-License-Identifier: Apache-2.0

"""A nova.conf drop-in (for ``/etc/nova/nova.conf.d/``) from a host's GPUs.

:func:`generate` is a pure function of a
:class:`~gpu_nova_ext.inventory.base.HostInventory`: it decides, GPU by
GPU, how Nova offers it and writes the options Nova needs for that:

* ``passthrough``: a ``[pci] device_spec`` entry for the GPU's address
  tagged with a per-model ``resource_class`` (``CUSTOM_GPU_<MODEL>``) and
  our static traits (vendor, model, memory, CUDA capability, driver branch,
  mode, MIG), ``managed=yes`` (no ``live_migratable`` tag); one ``[pci] alias``
  per model (``gpu-<model>``).  Nova replaces the trait set of its PCI
  providers from these tags on every update, so the device_spec is the
  only place where such a provider's traits can come from.
* ``vgpu-vfio`` (NVIDIA's vendor-specific VFIO vGPU): a ``device_spec``
  entry per VF with ``resource_class`` ``CUSTOM_GPU_VGPU_<TYPE>``,
  ``managed=no`` (the NVIDIA variant driver owns the VF) and
  ``live_migratable=yes``; one alias per vGPU type (``vgpu-<type>``).
* ``vgpu`` and ``mig-vgpu`` (mdev): ``[devices] enabled_mdev_types`` and an
  ``[mdev_<type>]`` section with ``device_addresses`` (the GPU, or its VFs
  where the type lives on VFs), ``mdev_class`` ``CUSTOM_VGPU_<MODEL>`` (per
  model, so quota can count each model; a MIG-backed type's is its
  profile's, ``CUSTOM_VGPU_MIG_<PROFILE>``, so a flavor gets the size it
  asks for; ``vgpu_class='vgpu'`` keeps Nova's ``VGPU``) and, on request,
  ``max_instances``.  The agent writes
  the traits of these providers itself.
* The scheduler side: ``[filter_scheduler]`` ``available_filters``,
  ``enabled_filters`` (Nova's defaults, ``PciPassthroughFilter`` and ours),
  ``weight_classes`` and ``pci_in_placement``, plus ``[pci]
  report_in_placement``, and ``[scheduler] max_placement_results`` as
  :mod:`gpu_nova_ext.operator.scale_settings` recommends (with a comment
  saying why; ``nova-conf --placement-conf`` writes Placement's part).

Nova reads ``[pci] alias`` on nova-api and nova-scheduler too, so the same
drop-in (or its ``[pci] alias`` and ``[filter_scheduler]`` part) belongs on
the controllers.
"""
import dataclasses
import json

from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming
from gpu_nova_ext.operator import nova_conf_mig
from gpu_nova_ext.operator import resource_classes
from gpu_nova_ext.operator import scale_settings
from gpu_nova_ext.placement import translation

#: Nova 34's default ``[filter_scheduler] enabled_filters``.
NOVA_DEFAULT_FILTERS = (
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter')
PCI_FILTER = 'PciPassthroughFilter'
GPU_FILTERS = (
    'GpuModelFilter', 'GpuMemoryFilter', 'GpuCapabilityFilter',
    'GpuHealthFilter', 'GpuReservationFilter', 'GpuPowerProfileFilter',
    'GpuTopologyFilter', 'GpuCandidateOrderFilter')
AVAILABLE_FILTERS = (
    'nova.scheduler.filters.all_filters',
    'gpu_nova_ext.scheduler.filters.all_filters')
WEIGHT_CLASSES = (
    'nova.scheduler.weights.all_weighers',
    'gpu_nova_ext.scheduler.weighers.all_weighers')

# the resource class names live in resource_classes (quota reads them too)
VGPU_RC_PREFIX = resource_classes.VGPU_RC_PREFIX
MDEV_RC_PREFIX = resource_classes.MDEV_RC_PREFIX
VGPU_CLASSES = resource_classes.VGPU_CLASSES
pci_resource_class = resource_classes.pci_resource_class
vgpu_resource_class = resource_classes.vgpu_resource_class
mdev_resource_class = resource_classes.mdev_resource_class
mig_resource_class = resource_classes.mig_resource_class


def _slug(text: str) -> str:
    return naming.normalize_model(text).lower().replace('_', '-')


def alias_name(model: str) -> str:
    """``[pci] alias`` name of a passthrough GPU model: ``gpu-a100-80gb-pcie``.

    Usable in ``pci_passthrough:alias`` (no ``:`` or ``,``).
    """
    return 'gpu-' + _slug(model)


def vgpu_alias_name(vgpu_type: str) -> str:
    """Alias of a vendor-VFIO vGPU type: ``vgpu-a100d-10c``."""
    return 'vgpu-' + _slug(vgpu_type)


def effective_mode(gpu: base.Gpu) -> str:
    """How the GPU is offered: discovery's answer, else what it has."""
    if gpu.mode:
        return gpu.mode
    if gpu.mdev_types:
        return (naming.MODE_MIG_VGPU if gpu.mig_enabled
                else naming.MODE_VGPU)
    if gpu.vfio_vgpu_types:
        return naming.MODE_VGPU_VFIO
    return naming.MODE_PASSTHROUGH


def static_traits(gpu: base.Gpu, mode: str | None = None) -> list[str]:
    """Our static traits of a GPU (the agent's vocabulary), sorted."""
    return sorted(translation.gpu_traits(gpu, mode or effective_mode(gpu)))


@dataclasses.dataclass
class GeneratorOptions:
    """What the operator chose; the defaults suit Nova 34."""

    #: vGPU types to offer (ids like ``nvidia-471`` or names like
    #: ``A100D-10C``), in order of preference; empty: what Nova already
    #: offers (``Gpu.offered_vgpu_type``), else the first type listed.
    vgpu_types: tuple[str, ...] = ()
    #: ``[pci] report_in_placement`` / ``[filter_scheduler]
    #: pci_in_placement``: PCI devices as Placement providers.
    pci_in_placement: bool = True
    #: write the ``[filter_scheduler]`` section
    scheduler: bool = True
    #: ``numa_policy`` of the aliases (``legacy`` when None)
    numa_policy: str | None = None
    #: write ``[mdev_<type>] max_instances`` (the type's maximum summed over
    #: its parents).  Off by default: Nova already derives the maximum from
    #: libvirt's available instances, and a cap that does not match them
    #: (a GPU added later; a driver whose counts do not drop as mdevs are
    #: created) makes nova-compute zero the inventory of whole GPUs.
    max_instances: bool = False
    #: ``[mdev_<type>] mdev_class``: ``model`` (``CUSTOM_VGPU_<MODEL>``,
    #: the default) or ``vgpu`` (Nova's ``VGPU``, no ``mdev_class``)
    vgpu_class: str = 'model'
    #: ``[mig] layouts``: model -> ((profile name, count), ...); a GPU of
    #: such a model gets one mdev type per profile (nova_conf_mig)
    mig_layouts: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class DropIn:
    """The generated options, section by section, in writing order.

    ``sections`` maps a group to ``(option, value)`` pairs; an option that
    appears several times is a multi-valued one (``device_spec``).
    ``notes`` are the decisions an operator should read (also written as
    comments at the top of the file).
    """

    host: str
    sections: dict[str, list[tuple[str, str]]] = dataclasses.field(
        default_factory=dict)
    notes: list[str] = dataclasses.field(default_factory=list)
    #: ``(section, option)`` -> why, written as a comment above it
    why: dict[tuple[str, str], str] = dataclasses.field(
        default_factory=dict)

    def add(self, section: str, option: str, value: str,
            why: str | None = None) -> None:
        self.sections.setdefault(section, []).append((option, value))
        if why:
            self.why[(section, option)] = why

    def values(self, section: str, option: str) -> list[str]:
        return [v for o, v in self.sections.get(section, []) if o == option]

    def render(self) -> str:
        lines = ['# nova.conf drop-in for GPU host %s, written by '
                 '"gpu-nova-ext nova-conf".' % self.host,
                 '# Put it in /etc/nova/nova.conf.d/ (nova-compute, and the '
                 '[pci] alias and',
                 '# [filter_scheduler] parts on nova-api and '
                 'nova-scheduler), then restart them.']
        for note in self.notes:
            lines.append('# NOTE: %s' % note)
        for section, pairs in self.sections.items():
            lines.append('')
            lines.append('[%s]' % section)
            for option, value in pairs:
                why = self.why.get((section, option))
                if why:
                    lines += scale_settings.comment(why)
                lines.append('%s = %s' % (option, value))
        return '\n'.join(lines) + '\n'


def _json(spec: dict[str, str]) -> str:
    # compact: devstack's iniset_multiline splits values on whitespace
    return json.dumps(spec, separators=(',', ':'))


def _choose_type(gpu: base.Gpu, types: list[base.MdevType],
                 opts: GeneratorOptions,
                 notes: list[str]) -> base.MdevType | None:
    def find(wanted):
        for t in types:
            if wanted in _type_names(gpu, t):
                return t
        return None

    if opts.vgpu_types:
        for wanted in opts.vgpu_types:
            found = find(wanted)
            if found:
                return found
        notes.append('GPU %s offers none of the vGPU types asked for (%s); '
                     'left out. It offers: %s.' % (
                         gpu.pci_address, ', '.join(opts.vgpu_types),
                         ', '.join(_type_label(t) for t in types) or 'none'))
        return None
    if gpu.offered_vgpu_type:
        found = find(gpu.offered_vgpu_type)
        if found:
            return found
    if not types:
        return None
    chosen = types[0]
    if len({t.id for t in types}) > 1:
        notes.append('GPU %s: offering vGPU type %s, the first it lists; '
                     'pass --vgpu-type to choose another.' % (
                         gpu.pci_address, _type_label(chosen)))
    return chosen


def _type_names(gpu: base.Gpu, t: base.MdevType) -> set[str]:
    """Id and names of a type: libvirt's, and NVML's for the same id."""
    names = {t.id}
    if t.name:
        names.add(t.name)
    for nv in gpu.vgpu_types:
        if nv.id == t.id and nv.name:
            names.add(nv.name)
    return names


def _type_label(t: base.MdevType) -> str:
    return '%s (%s)' % (t.id, t.name) if t.name else t.id


def _passthrough(gpu: base.Gpu, drop: DropIn, aliases: dict,
                 opts: GeneratorOptions) -> None:
    if not gpu.model:
        drop.notes.append('GPU %s has no known model; left out of [pci] '
                          'device_spec.' % gpu.pci_address)
        return
    rc = pci_resource_class(gpu.model)
    spec = {}
    if gpu.vendor_id:
        spec['vendor_id'] = gpu.vendor_id
    if gpu.product_id:
        spec['product_id'] = gpu.product_id
    spec.update({
        'address': gpu.pci_address,
        'resource_class': rc,
        'traits': ','.join(static_traits(gpu, naming.MODE_PASSTHROUGH)),
        'managed': 'yes',
        # No live_migratable tag: Nova refuses to start on libvirt < 10 or
        # QEMU < 8.2.2 whenever the tag is present, even as "no", and not
        # live-migratable is already its default for passthrough.
    })
    drop.add('pci', 'device_spec', _json(spec))
    name = alias_name(gpu.model)
    if name not in aliases:
        alias = {'name': name}
        if gpu.vendor_id and gpu.product_id:
            alias.update(vendor_id=gpu.vendor_id, product_id=gpu.product_id)
        elif not opts.pci_in_placement:
            drop.notes.append('alias %s: the PCI vendor/product IDs of %s are '
                              'unknown and Nova needs them without PCI in '
                              'Placement.' % (name, gpu.pci_address))
        alias['resource_class'] = rc
        if opts.numa_policy:
            alias['numa_policy'] = opts.numa_policy
        aliases[name] = alias


def _vgpu_vfio(gpu: base.Gpu, drop: DropIn, aliases: dict,
               opts: GeneratorOptions) -> None:
    chosen = _choose_type(gpu, gpu.vfio_vgpu_types, opts, drop.notes)
    if chosen is None:
        return
    if not gpu.vfs:
        drop.notes.append('GPU %s offers vendor VFIO vGPU but has no SR-IOV '
                          'VFs enabled; enable them (nvidia sriov-manage) and '
                          'run nova-conf again.' % gpu.pci_address)
        return
    type_name = chosen.name or chosen.id
    rc = vgpu_resource_class(type_name)
    traits = ','.join(static_traits(gpu, naming.MODE_VGPU_VFIO))
    for vf in gpu.vfs:
        spec = {}
        if gpu.vendor_id:
            spec['vendor_id'] = gpu.vendor_id
        spec.update({'address': vf, 'resource_class': rc, 'traits': traits,
                     'managed': 'no', 'live_migratable': 'yes'})
        drop.add('pci', 'device_spec', _json(spec))
    drop.notes.append('GPU %s: set vGPU type %s on its %d VFs (sysfs '
                      'nvidia/current_vgpu_type) before nova-compute starts.'
                      % (gpu.pci_address, _type_label(chosen), len(gpu.vfs)))
    name = vgpu_alias_name(type_name)
    if name not in aliases:
        alias = {'name': name, 'device_type': 'type-VF',
                 'resource_class': rc}
        if not opts.pci_in_placement:
            drop.notes.append('alias %s: vendor VFIO vGPU needs [pci] '
                              'report_in_placement (VF product IDs are not '
                              'known to this generator).' % name)
        if opts.numa_policy:
            alias['numa_policy'] = opts.numa_policy
        aliases[name] = alias


def _type_entry(mdev_types: dict, type_id: str, gpu: base.Gpu) -> dict:
    """The drop-in's record of one mdev type, ``gpu`` counted in.

    Parents, maximum, the models offering it and its MIG profiles (None
    for a time-sliced type).
    """
    entry = mdev_types.setdefault(type_id, {'addresses': [], 'max': 0,
                                            'models': set(),
                                            'profiles': set()})
    entry['models'].add(naming.normalize_model(gpu.model or ''))
    return entry


def _mdev(gpu: base.Gpu, mdev_types: dict, opts: GeneratorOptions,
          notes: list[str]) -> None:
    chosen = _choose_type(gpu, gpu.mdev_types, opts, notes)
    if chosen is None:
        return
    entry = _type_entry(mdev_types, chosen.id, gpu)
    entry['profiles'].add(nova_conf_mig.type_profile(gpu, chosen))
    for t in gpu.mdev_types:
        if t.id != chosen.id:
            continue
        address = t.parent or gpu.pci_address
        if address not in entry['addresses']:
            entry['addresses'].append(address)
            per_parent = t.max if t.max is not None else _nvml_max(gpu, t)
            if entry['max'] is not None and per_parent is not None:
                entry['max'] += per_parent
            else:
                entry['max'] = None


def _mig_layout(gpu: base.Gpu, mdev_types: dict, opts: GeneratorOptions,
                notes: list[str]) -> None:
    chosen = nova_conf_mig.layout_types(gpu, opts.mig_layouts[gpu.model],
                                        notes)
    if not chosen:
        # not laid out yet (in use, or the agent has not run): keep what
        # the GPU offers now
        notes.append('GPU %s: its MIG layout is not applied yet; offering '
                     'its current vGPU type.' % gpu.pci_address)
        _mdev(gpu, mdev_types, opts, notes)
        return
    for type_id, parents in chosen.items():
        entry = _type_entry(mdev_types, type_id, gpu)
        entry['profiles'].update(nova_conf_mig.type_profile(gpu, t)
                                 for t in gpu.mdev_types if t.id == type_id)
        entry['addresses'].extend(parents)
        if entry['max'] is not None:
            entry['max'] += len(parents)    # one vGPU per parent VF


def _nvml_max(gpu: base.Gpu, t: base.MdevType) -> int | None:
    # libvirt reports availability only; NVML knows a type's maximum
    for nv in gpu.vgpu_types:
        if nv.max and (nv.id == t.id or (t.name and nv.name
                                         and nv.name.endswith(t.name))):
            return nv.max
    return None


def _mdev_class(type_id: str, entry: dict, opts: GeneratorOptions,
                notes: list[str]) -> str | None:
    """The type's ``mdev_class``, or None (Nova's VGPU) with a note.

    A MIG-backed type gets its profile's class
    (``CUSTOM_VGPU_MIG_2G_20GB``, as the simulator's hosts offer it):
    on a GPU whose layout mixes sizes only a class per size lets a flavor
    get the size it asks for.  A time-sliced type gets its model's.
    """
    if opts.vgpu_class == 'vgpu':
        return None
    models, profiles = entry['models'], entry['profiles']
    if len(profiles) == 1 and None not in profiles:
        return mig_resource_class(next(iter(profiles)))
    if len(models) == 1 and '' not in models:
        return mdev_resource_class(next(iter(models)))
    notes.append('[mdev_%s] mdev_class left out (Nova\'s VGPU): %s; Nova '
                 'gives one class per type. Flavors ask resources:VGPU for '
                 'it.' % (type_id, 'a GPU of this type has no known model'
                          if '' in models else 'GPUs of models %s offer it'
                          % ', '.join(sorted(models))))
    return None


def scheduler_section(drop: DropIn, opts: GeneratorOptions,
                      with_pci: bool = True) -> None:
    """Append the ``[filter_scheduler]`` options.

    See the design doc (doc/source/contributor): Scheduler plugins.
    """
    for path in AVAILABLE_FILTERS:
        drop.add('filter_scheduler', 'available_filters', path)
    filters = list(NOVA_DEFAULT_FILTERS)
    if with_pci:
        filters.append(PCI_FILTER)
    filters += GPU_FILTERS
    drop.add('filter_scheduler', 'enabled_filters', ','.join(filters))
    drop.add('filter_scheduler', 'weight_classes', ','.join(WEIGHT_CLASSES))
    drop.add('filter_scheduler', 'pci_in_placement',
             str(opts.pci_in_placement))
    for (section, option), value in scale_settings.NOVA.items():
        drop.add(section, option, str(value),
                 why=scale_settings.WHY[(section, option)] + ' (%s)' % (
                     scale_settings.PLACEMENT_HINT))


def generate(inventory: base.HostInventory,
             opts: GeneratorOptions | None = None) -> DropIn:
    """Compute the nova.conf drop-in of one host.  No I/O."""
    opts = opts or GeneratorOptions()
    drop = DropIn(host=inventory.host)
    aliases: dict[str, dict[str, str]] = {}
    mdev_types: dict[str, dict] = {}
    for gpu in sorted(inventory.gpus, key=lambda g: g.pci_address):
        mode = effective_mode(gpu)
        if mode == naming.MODE_PASSTHROUGH:
            _passthrough(gpu, drop, aliases, opts)
        elif mode == naming.MODE_VGPU_VFIO:
            _vgpu_vfio(gpu, drop, aliases, opts)
        elif gpu.model in opts.mig_layouts:
            _mig_layout(gpu, mdev_types, opts, drop.notes)
        else:
            _mdev(gpu, mdev_types, opts, drop.notes)
    pci_used = bool(aliases)
    if pci_used:
        drop.add('pci', 'report_in_placement', str(opts.pci_in_placement))
        for alias in aliases.values():
            drop.add('pci', 'alias', _json(alias))
    if mdev_types:
        drop.add('devices', 'enabled_mdev_types', ','.join(mdev_types))
        for type_id, entry in mdev_types.items():
            section = 'mdev_%s' % type_id
            drop.add(section, 'device_addresses',
                     ','.join(entry['addresses']))
            mdev_class = _mdev_class(type_id, entry, opts, drop.notes)
            if mdev_class:
                drop.add(section, 'mdev_class', mdev_class)
            if opts.max_instances and entry['max']:
                drop.add(section, 'max_instances', str(entry['max']))
            elif opts.max_instances:
                drop.notes.append('[%s] max_instances left out: the maximum '
                                  'of %s is not known on every parent.'
                                  % (section, type_id))
    if not inventory.gpus:
        drop.notes.append('no GPU found on this host.')
    if opts.scheduler:
        scheduler_section(drop, opts, with_pci=True)
    return drop
