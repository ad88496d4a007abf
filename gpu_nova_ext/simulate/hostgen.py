# SPDX-License-Identifier: Apache-2.0

"""Host XML from a list of GPUs: ``gpus: [{model, count, mode, ...}]``.

Operators describe a host kind by its GPUs instead of hand-written libvirt
XML; this module writes the libvirt test-driver ``<node>`` document that
libvirt would report for such a host, plus the facts the ``simulated``
inventory source (NVML's stand-in) gives for each GPU:

* PCI vendor and device IDs from the project's PCI-ID table
  (:data:`gpu_nova_ext.inventory.gpu_models.PCI_MODELS`), so the agent finds
  the same model through libvirt as through NVML;
* ``mode: passthrough``: a plain PCI function per GPU (nova-compute's PCI
  in Placement);
* ``mode: vgpu``: the GPU lists the mdev type with ``availableInstances``
  (NVIDIA time-sliced vGPU on the physical function);
* ``mode: vgpu-vfio``: SR-IOV (NVIDIA Ampere and later): the GPU has one
  virtual function per vGPU instance, each listing the mdev type with one
  instance.
* a model the host kind's ``mig:`` lays out (:func:`mig_types`): MIG
  mode on, one VF per GPU instance of the layout, each listing the
  MIG-backed vGPU type of its instance's profile with one instance (what
  the agent's layout plus nova.conf's ``[mdev_*] device_addresses`` give
  on a real host).

The scenario schema (:mod:`gpu_nova_ext.simulate.schema`) has checked
every value.
"""
import dataclasses
from typing import Any
from xml.sax import saxutils

from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext import naming
from gpu_nova_ext.operator import resource_classes
from gpu_nova_ext.simulate import schema

#: ``gpus: [{mode: ...}]`` (the scenario schema reads it)
MODES = ('passthrough', 'vgpu', 'vgpu-vfio')
#: the mode of the GPUs of a model the host kind's ``mig:`` lays out
MIG_MODE = 'mig'
#: The board part of NVIDIA's MIG-backed vGPU type names per MIG board
#: (``A100D-1-10C`` on an A100 80GB; NVIDIA vGPU software documentation,
#: "Virtual GPU Types for Supported GPUs").  The H200's and B200's are
#: written in the same pattern, unconfirmed; the simulator only needs the
#: names to say the profile, as :mod:`gpu_nova_ext.operator.nova_conf_mig`
#: reads it back.
MIG_TYPE_PREFIX = {'A100_40GB': 'A100', 'A100_80GB': 'A100D',
                   'A30': 'A30', 'H100_80GB': 'H100', 'H200': 'H200',
                   'B200': 'B200'}
#: model -> (vendor_id, device_id): the first PCI ID of each model (its
#: keys are the models ``gpus: [{model: ...}]`` takes: the scenario
#: schema reads them)
PCI_ID_OF_MODEL: dict[str, tuple[str, str]] = {}
for _ids, _model in gpu_models.PCI_MODELS.items():
    PCI_ID_OF_MODEL.setdefault(_model, _ids)
# Physical memory (MiB) as NVML / amdsmi / xpu-smi report it, for models
# whose name does not say it; a scenario may give memory_mib itself.
MEMORY_MIB = {
    'TESLA_T4': 15360, 'A10': 23028, 'A10G': 23028, 'A30': 24576,
    'A40': 46068, 'RTX_A6000': 49140, 'L4': 23034, 'L40': 46068,
    'L40S': 46068, 'H100_80GB_HBM3': 81559, 'H100_PCIE': 81559,
    'H100_NVL': 95830, 'H200': 143771, 'H200_NVL': 143771,
    'B200': 183359, 'MI100': 32768, 'MI210': 65536, 'MI250': 131072,
    'MI250X': 131072, 'MI300A': 131072, 'MI300X': 196608,
    'FLEX_170': 16384, 'FLEX_140': 12288, 'MAX_1550': 131072,
    'MAX_1350': 98304, 'MAX_1100': 49152,
    'RTX_6000_ADA_GENERATION': 49140,
}
DEFAULT_DRIVER = {'nvidia': '550.54.15', 'amd': '6.8.5', 'intel': '1.3.29'}
FIRST_BUS = 0x10
#: the PCIe switches' upstream ports, one per two GPUs (design doc:
#: Topology); the GPUs' buses start at FIRST_BUS
SWITCH_BUS = 0x04
NVLINK = ('none', 'pairs', 'all')
#: NVLinks per peer: a bridge joins a pair with 12 (A100) or more; an
#: NVSwitch board's GPUs reach every other through the switches
_LINKS = {'pairs': 12, 'all': 18}


@dataclasses.dataclass
class GpuSpec:
    """One ``gpus:`` entry of a host kind (checked)."""

    model: str
    count: int
    mode: str
    vgpu_type: str | None = None
    vgpu_name: str | None = None
    vgpu_instances: int | None = None
    memory_mib: int | None = None
    cuda_cc: str | None = None
    driver_version: str | None = None
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    health: str | None = None
    #: the ``mig_layout.Layout`` of the GPUs (mode ``mig``)
    layout: Any = None
    #: NVLink: none, pairs (bridged pairs) or all (an NVSwitch board)
    nvlink: str = 'none'
    #: the GPUs' PCI addresses (None: laid out by :func:`generate`)
    addresses: list[str] | None = None

    @property
    def vendor_id(self) -> str:
        return PCI_ID_OF_MODEL[self.model][0]

    @property
    def device_id(self) -> str:
        return PCI_ID_OF_MODEL[self.model][1]

    @property
    def vendor(self) -> str:
        return naming.VENDOR_IDS[self.vendor_id]

    def memory(self) -> int | None:
        if self.memory_mib is not None:
            return self.memory_mib
        if self.model in MEMORY_MIB:
            return MEMORY_MIB[self.model]
        gb = [int(p[:-2]) for p in self.model.split('_')
              if p.endswith('GB') and p[:-2].isdigit()]
        return gb[0] * 1024 if gb else None

    def instances(self) -> int:
        """vGPUs one GPU holds: given, or memory / the type's framebuffer."""
        if self.vgpu_instances is not None:
            return self.vgpu_instances
        framebuffer = naming.vgpu_type_framebuffer_mib(self.vgpu_name)
        memory = self.memory()
        if framebuffer and memory:
            return max(1, memory // framebuffer)
        raise ValueError('give vgpu_instances (vGPUs per GPU) or a '
                         'vgpu_name whose framebuffer is known (like '
                         'A100D-10C)')


@dataclasses.dataclass(frozen=True)
class MigType:
    """The MIG-backed vGPU type of one GPU-instance profile."""

    id: str                  # the mdev type id (simulated: nvidia-mig-...)
    name: str                # NVIDIA's type name, e.g. A100D-2-20C
    profile: str             # 2g.20gb
    resource_class: str      # its [mdev_<id>] mdev_class
    units: float             # GPU units per instance: compute slices / 7


def mig_type(layout, profile) -> MigType:
    """The vGPU type a layout's ``profile`` (a MigProfile) offers."""
    board = layout.board
    base, _, media = profile.name.partition('+')
    gb = base.split('.')[1].rstrip('gb')
    name = '%s-%d-%sC%s' % (MIG_TYPE_PREFIX.get(board.key, board.key),
                            profile.compute_slices, gb,
                            'ME' if media else '')
    return MigType(id='nvidia-mig-' + name.lower(), name=name,
                   profile=profile.name,
                   resource_class=resource_classes.mig_resource_class(
                       profile.name),
                   units=profile.compute_slices / board.compute_slices)


def mig_types(layout) -> list[MigType]:
    """One type per profile of ``layout``, in the layout's order."""
    return [mig_type(layout, layout.board.profile(name))
            for name, _count in layout.counts]


@dataclasses.dataclass
class Generated:
    xml_text: str
    facts: dict[str, dict[str, Any]]       # GPU address -> simulated facts
    nova_gpu_mode: str                     # vgpu | pci
    enabled_mdev_types: list[str]
    #: mdev type id -> its MIG type, for the types of ``mig:`` layouts
    mig_types: dict[str, MigType] = dataclasses.field(default_factory=dict)
    #: the models of the GPUs
    models: list[str] = dataclasses.field(default_factory=list)


def _address(bus: int, slot: int = 0, function: int = 0) -> str:
    return '0000:%02x:%02x.%x' % (bus, slot, function)


def _device(address: str, spec: GpuSpec, numa: int, *, vfs=(),
            pf: str | None = None, mdev: tuple[str, str, int] | None = None
            ) -> str:
    dom, bus, rest = address.split(':')
    slot, func = rest.split('.')
    name = 'pci_' + address.replace(':', '_').replace('.', '_')
    caps = []
    if vfs:
        caps.append("<capability type='virt_functions' maxCount='%d'>%s"
                    "</capability>" % (len(vfs), ''.join(
                        _addr_element(v) for v in vfs)))
    if pf:
        caps.append("<capability type='phys_function'>%s</capability>"
                    % _addr_element(pf))
    if mdev:
        type_id, type_name, available = mdev
        caps.append(
            "<capability type='mdev_types'><type id=%s><name>%s</name>"
            "<deviceAPI>vfio-pci</deviceAPI><availableInstances>%d"
            "</availableInstances></type></capability>" % (
                saxutils.quoteattr(type_id), saxutils.escape(type_name),
                available))
    return (
        "<device><name>%s</name><parent>computer</parent>"
        "<capability type='pci'><class>0x030200</class><domain>%d</domain>"
        "<bus>%d</bus><slot>%d</slot><function>%d</function>"
        "<product id='0x%s'>[%s]</product><vendor id='0x%s'/>%s"
        "<numa node='%d'/></capability></device>" % (
            name, int(dom, 16), int(bus, 16), int(slot, 16), int(func, 16),
            spec.device_id, saxutils.escape(spec.model), spec.vendor_id,
            ''.join(caps), numa))


def _addr_element(address: str) -> str:
    dom, bus, rest = address.split(':')
    slot, func = rest.split('.')
    return ("<address domain='0x%s' bus='0x%s' slot='0x%s' "
            "function='0x%s'/>" % (dom, bus, slot, func))


def _facts(spec: GpuSpec) -> dict[str, Any]:
    facts: dict[str, Any] = {'name': spec.model.replace('_', ' ')}
    memory = spec.memory()
    if memory is not None:
        facts['memory_mib'] = memory
    facts['driver_version'] = (spec.driver_version or
                               DEFAULT_DRIVER[spec.vendor])
    if spec.cuda_cc:
        facts['cuda_cc'] = spec.cuda_cc
    if spec.metrics:
        facts['metrics'] = dict(spec.metrics)
    if spec.health:
        facts['health'] = {'state': spec.health, 'reasons': []}
    if spec.mode == MIG_MODE:
        facts['mig'] = {'capable': True, 'enabled': True}
        facts['vgpu_types'] = [
            {'id': t.id, 'name': t.name, 'max': count}
            for t, (_n, count) in zip(mig_types(spec.layout),
                                      spec.layout.counts)]
    elif spec.mode != 'passthrough':
        facts['vgpu_types'] = [{'id': spec.vgpu_type,
                                'name': spec.vgpu_name or spec.vgpu_type,
                                'max': spec.instances()}]
    return facts


def _nvlink_peers(spec: GpuSpec, k: int) -> list[int]:
    """The kind's GPUs (by position) GPU ``k`` of it has NVLinks to."""
    if spec.nvlink == 'pairs':
        partner = k ^ 1
        return [partner] if partner < spec.count else []
    if spec.nvlink == 'all':
        return [j for j in range(spec.count) if j != k]
    return []


def generate(specs: list[GpuSpec]) -> Generated:
    """The host XML and GPU facts of a host with these GPUs."""
    devices = []
    facts = {}
    mdev_types: list[str] = []
    migs: dict[str, MigType] = {}
    bus = FIRST_BUS
    index = 0
    #: every device's address
    at: list[str] = []
    total = sum(spec.count for spec in specs)
    for spec in specs:
        kind_first = index
        # the kind's GPUs: its own addresses, or two buses apart (the
        # next bus holds a GPU's VFs)
        pfs = spec.addresses or [_address(bus + 2 * k)
                                 for k in range(spec.count)]
        for _ in range(spec.count):
            pf = pfs[index - kind_first]
            # two sockets: the first half of the GPUs on node 0 (two GPUs
            # per PCIe switch, as boards pair them)
            numa = 0 if index < (total + 1) // 2 else 1
            name = spec.vgpu_name or spec.vgpu_type or ''
            if spec.mode == MIG_MODE:
                # one VF per GPU instance, each with its profile's type
                types = {t.profile: t for t in mig_types(spec.layout)}
                vfs = []
                for k, (profile, _start) in enumerate(
                        spec.layout.placements):
                    vf = _address(bus + 1, k // 8, k % 8)
                    t = types[profile.name]
                    vfs.append((vf, t))
                    migs[t.id] = t
                    if t.id not in mdev_types:
                        mdev_types.append(t.id)
                at += [v for v, _t in vfs]
                devices.append(_device(pf, spec, numa,
                                       vfs=[v for v, _t in vfs]))
                devices += [_device(vf, spec, numa, pf=pf,
                                    mdev=(t.id, t.name, 1))
                            for vf, t in vfs]
            elif spec.mode == 'vgpu-vfio':
                vfs = [_address(bus + 1, k // 8, k % 8)
                       for k in range(spec.instances())]
                at += vfs
                devices.append(_device(pf, spec, numa, vfs=vfs))
                devices += [_device(vf, spec, numa, pf=pf,
                                    mdev=(spec.vgpu_type, name, 1))
                            for vf in vfs]
            elif spec.mode == 'vgpu':
                devices.append(_device(pf, spec, numa, mdev=(
                    spec.vgpu_type, name, spec.instances())))
            else:
                devices.append(_device(pf, spec, numa))
            if spec.vgpu_type and spec.vgpu_type not in mdev_types:
                mdev_types.append(spec.vgpu_type)
            at.append(pf)
            facts[pf] = _facts(spec)
            facts[pf]['pci_switch'] = _address(SWITCH_BUS + index // 2)
            peers = _nvlink_peers(spec, index - kind_first)
            if peers:
                facts[pf]['nvlink_peers'] = {
                    pfs[k]: _LINKS[spec.nvlink] for k in peers}
            bus += 2
            index += 1
    _check_unique(at)
    xml = '<node>\n%s\n</node>\n' % '\n'.join(devices)
    modes = {s.mode == 'passthrough' for s in specs}
    if len(modes) > 1:
        raise ValueError('mixes passthrough and vGPU GPUs; nova-compute '
                         'offers a host\'s GPUs one way: make two host '
                         'kinds')
    return Generated(xml_text=xml, facts=facts,
                     nova_gpu_mode='pci' if modes == {True} else 'vgpu',
                     enabled_mdev_types=mdev_types, mig_types=migs,
                     models=sorted({s.model for s in specs}))


def _check_unique(addresses: list[str]) -> None:
    """Every device at its own PCI address (a kind's ``addresses:``)."""
    seen: set[str] = set()
    for address in addresses:
        if address in seen:
            raise ValueError(
                'two devices at PCI address %s: a kind\'s addresses: '
                'collide with another kind\'s or with the simulator\'s '
                'layout of a kind without them (buses %02x and up); give '
                'every kind distinct addresses:' % (address, FIRST_BUS))
        seen.add(address)


def parse(src: schema.Source, value: list, entry: str,
          layouts: dict | None = None, mig_entry: str = 'mig'
          ) -> Generated:
    """``gpus:`` as a list of GPU kinds -> the host XML and GPU facts.

    The scenario schema has checked each entry's keys and values; what
    is left here depends on other entries (the host kind's ``mig:``) or
    on the model table (its vendor).

    :param layouts: model -> ``mig_layout.Layout`` of the host kind's
        ``mig:``; the GPUs of those models are laid out by it.
    """
    layouts = layouts or {}
    specs = []
    for i, item in enumerate(value):
        gentry = '%s[%d]' % (entry, i)
        model = item['model']
        spec = GpuSpec(
            model=model, count=item['count'],
            mode=item.get('mode', 'passthrough'),
            vgpu_name=item.get('vgpu_name'),
            vgpu_instances=item.get('vgpu_instances'),
            memory_mib=item.get('memory_mib'),
            cuda_cc=str(item['cuda_cc']) if 'cuda_cc' in item else None,
            driver_version=(str(item['driver_version'])
                            if 'driver_version' in item else None),
            metrics={str(k): float(v)
                     for k, v in (item.get('metrics') or {}).items()},
            health=item.get('health'),
            nvlink=item.get('nvlink', 'none'),
            addresses=([naming.normalize_pci_address(str(a))
                        for a in item['addresses']]
                       if 'addresses' in item else None))
        if spec.addresses is not None and (
                len(spec.addresses) != spec.count):
            raise src.fail(gentry + '.addresses', '%d addresses for %d '
                           'GPUs (count): give one per GPU' % (
                               len(spec.addresses), spec.count))
        if spec.addresses and (model in layouts
                               or spec.mode == 'vgpu-vfio'):
            raise src.fail(gentry + '.addresses', 'not with %s: its VFs '
                           'are laid out by the simulator; drop '
                           'addresses:' % ('the MIG layout of %s' % model
                                           if model in layouts
                                           else 'mode vgpu-vfio'))
        if model in layouts:
            layout = layouts[model]
            if item.get('mode') == 'passthrough':
                raise src.fail(mig_entry, 'GPU model %s is whole-GPU '
                               'passthrough (%s.mode) and has the MIG '
                               'layout %s: a GPU is either MIG-'
                               'partitioned or passed through; drop one'
                               % (model, gentry, layout.describe()))
            for key in ('mode', 'vgpu_type', 'vgpu_name', 'vgpu_instances'):
                if key in item:
                    raise src.fail('%s.%s' % (gentry, key), 'follows '
                                   'from the MIG layout of %s in %s; '
                                   'remove it' % (model, mig_entry))
            spec.mode, spec.layout = MIG_MODE, layout
        elif spec.mode != 'passthrough':
            if spec.vendor != 'nvidia':
                raise src.fail(gentry + '.mode', 'vGPU (mdev) is '
                               'simulated for NVIDIA GPUs; use '
                               'passthrough for %s' % model)
            if 'vgpu_type' not in item:
                raise src.fail(gentry, 'missing required key '
                               "'vgpu_type' (mode %s)" % spec.mode)
            spec.vgpu_type = item['vgpu_type']
            try:
                spec.instances()
            except ValueError as exc:
                raise src.fail(gentry, str(exc))
        elif 'vgpu_type' in item:
            raise src.fail(gentry + '.vgpu_type', 'only with mode vgpu or '
                           'vgpu-vfio')
        specs.append(spec)
    missing = sorted(set(layouts) - {s.model for s in specs})
    if missing:
        raise src.fail(mig_entry, 'MIG layout of GPU model %s, which this '
                       'host kind has no GPU of (its gpus: %s); fix the '
                       'model or drop the layout' % (
                           missing[0], ', '.join(sorted(
                               {s.model for s in specs}))))
    try:
        return generate(specs)
    except ValueError as exc:
        raise src.fail(entry, str(exc))
