# SPDX-License-Identifier: Apache-2.0

"""MIG layouts: parse, check, place, and plan them (no I/O).

A layout is what ``[mig] layouts`` declares for a GPU model: GPU-instance
profile counts, e.g. ``A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2``.
:func:`parse_layouts` refuses, with one line naming the model and the
profile, a model without MIG, a profile the model lacks, counts beyond a
profile's instance count or beyond the slices of the GPU (no placement
of NVIDIA's table holds them all).  :func:`plan_gpu` compares a GPU's
MIG state with its layout and says what would change and what cannot.
"""
import dataclasses
import json

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext.inventory import mig_profiles

OPTION = ('mig', 'layouts')


@dataclasses.dataclass(frozen=True)
class Layout:
    """The wanted GPU instances of one model, with their placements."""

    model: str
    board: mig_profiles.MigBoard
    counts: tuple[tuple[str, int], ...]        # (profile name, count)
    #: (profile, start): a placement of every instance, found at start
    placements: tuple[tuple[mig_profiles.MigProfile, int], ...]

    def describe(self) -> str:
        return ','.join('%s=%d' % c for c in self.counts)


def _bad(value: str, reason: str) -> exception.InvalidOption:
    return exception.InvalidOption(group=OPTION[0], option=OPTION[1],
                                   value=value, reason=reason)


def place(board: mig_profiles.MigBoard, profiles) -> list | None:
    """Placements of ``profiles`` (a list) on an empty GPU, or None.

    A depth-first search over the profiles' documented starts, largest
    first; the memory slices of two instances never overlap, the compute
    slices add up to at most the board's, as NVML checks at creation.
    """
    wanted = sorted(profiles, key=lambda p: (-p.memory_slices,
                                             -p.compute_slices, p.name))
    chosen: list = []

    def free(profile, start):
        span = set(range(start, start + profile.memory_slices))
        return not any(span & set(range(s, s + p.memory_slices))
                       for p, s in chosen)

    def search(i, compute):
        if i == len(wanted):
            return True
        profile = wanted[i]
        if compute + profile.compute_slices > board.compute_slices:
            return False
        for start in profile.starts:
            if free(profile, start):
                chosen.append((profile, start))
                if search(i + 1, compute + profile.compute_slices):
                    return True
                chosen.pop()
        return False

    return list(chosen) if search(0, 0) else None


def parse_layout(value: str) -> Layout:
    """One ``MODEL:PROFILE=COUNT[,PROFILE=COUNT...]`` value."""
    model, sep, rest = value.partition(':')
    model = model.strip().upper()
    if not sep or not model or not rest.strip():
        raise _bad(value, 'expected MODEL:PROFILE=COUNT[,PROFILE=COUNT...],'
                          ' for example A100_80GB_PCIE:3g.40gb=2')
    board = mig_profiles.board_for_model(model)
    if board is None:
        known = sorted(m for b in mig_profiles.BOARDS for m in b.models)
        raise _bad(value, 'GPU model %s has no MIG profiles (MIG models: '
                          '%s)' % (model, ', '.join(known)))
    counts: dict[str, int] = {}
    for item in rest.split(','):
        name, sep, count = item.strip().partition('=')
        profile = board.profile(name)
        if profile is None:
            raise _bad(value, 'GPU model %s has no MIG profile %r (it has: '
                              '%s)' % (model, name.strip(), ', '.join(
                                  p.name for p in board.profiles)))
        try:
            number = int(count)
        except ValueError:
            number = -1
        if not sep or number < 1:
            raise _bad(value, 'the count of MIG profile %s of GPU model %s '
                              'must be a whole number of 1 or more' % (
                                  profile.name, model))
        counts[profile.name] = counts.get(profile.name, 0) + number
        if counts[profile.name] > profile.max_instances:
            raise _bad(value, 'GPU model %s holds at most %d instance(s) '
                              'of MIG profile %s' % (
                                  model, profile.max_instances,
                                  profile.name))
    profiles = [board.profile(n) for n, c in counts.items()
                for _ in range(c)]
    placements = place(board, profiles)
    if placements is None:
        compute = sum(p.compute_slices for p in profiles)
        memory = sum(p.memory_slices for p in profiles)
        raise _bad(value, 'GPU model %s cannot hold %s: more slices than '
                          'the GPU has (%d of %d compute, %d of %d memory '
                          'slices, or no placement fits them all)' % (
                              model, ','.join('%s=%d' % c
                                              for c in counts.items()),
                              compute, board.compute_slices, memory,
                              board.memory_slices))
    return Layout(model, board, tuple(counts.items()), tuple(placements))


def parse_layouts(values) -> dict[str, Layout]:
    """``[mig] layouts`` -> model -> Layout; one model declared once."""
    layouts: dict[str, Layout] = {}
    for value in values or ():
        layout = parse_layout(value)
        if layout.model in layouts:
            raise _bad(value, 'GPU model %s has two layouts; declare one' %
                       layout.model)
        layouts[layout.model] = layout
    return layouts


def parse_scoped_layouts(values, option: str,
                         scope: str) -> dict[str, dict[str, Layout]]:
    """``aggregate_layouts`` / ``host_layouts`` -> scope -> model -> Layout.

    Values are ``SCOPE:MODEL:PROFILE=COUNT,...`` (see override_scope).
    """
    from gpu_nova_ext.agent import override_scope
    out: dict[str, dict[str, Layout]] = {}
    for value in values or ():
        name, rest = override_scope.split(value, OPTION[0], option, scope)
        try:
            layout = parse_layout(rest)
        except exception.InvalidOption as exc:
            raise exception.InvalidOption(
                group=OPTION[0], option=option, value=value,
                reason=exc.kwargs['reason'])
        mine = out.setdefault(name, {})
        if layout.model in mine:
            raise exception.InvalidOption(
                group=OPTION[0], option=option, value=value,
                reason='GPU model %s has two layouts for %s %s; declare '
                       'one' % (layout.model, scope, name))
        mine[layout.model] = layout
    return out


def check_passthrough(layouts: dict[str, Layout], device_specs) -> None:
    """Refuse a layout for a model nova.conf passes through whole.

    ``device_specs``: the JSON strings of nova.conf's ``[pci]
    device_spec`` (or ``passthrough_whitelist``).  A spec naming a
    vendor/product id whose model has a layout would hand the GPU to
    Nova as a whole PCI device while its instances are offered as vGPU.
    """
    for raw in device_specs or ():
        try:
            specs = json.loads(raw)
        except ValueError:
            continue
        for spec in specs if isinstance(specs, list) else [specs]:
            if not isinstance(spec, dict):
                continue
            model = gpu_models.model_for(spec.get('vendor_id'),
                                         spec.get('product_id'))
            if model in layouts:
                raise _bad(layouts[model].model + ':' +
                           layouts[model].describe(),
                           'GPU model %s is whole-GPU passthrough in '
                           'nova.conf ([pci] device_spec %s): a GPU is '
                           'either MIG-partitioned or passed through; drop '
                           'one' % (model, raw))


@dataclasses.dataclass
class GpuPlan:
    """What converging one GPU to its layout takes."""

    pci_address: str
    model: str | None
    layout: Layout | None
    #: where the layout came from: 'host NAME', 'aggregate UUID', 'model'
    source: str | None = None
    #: steps in order: ('enable', None) / ('destroy', (name, start)) /
    #: ('create', (name, start))
    steps: list = dataclasses.field(default_factory=list)
    #: why the steps cannot run now (allocations, servers, passthrough)
    blocked: list[str] = dataclasses.field(default_factory=list)
    #: what waits for something outside the agent (a GPU reset)
    pending: list[str] = dataclasses.field(default_factory=list)

    @property
    def in_line(self) -> bool:
        return not self.steps and not self.pending

    def describe_steps(self) -> list[str]:
        words = []
        for kind, what in self.steps:
            if kind == 'enable':
                words.append('enable MIG mode')
            else:
                words.append('%s %s at slice %d' % (kind, what[0], what[1]))
        return words


def plan_gpu(pci_address: str, model: str | None, layout: Layout | None,
             mig_current: bool | None, mig_pending: bool | None,
             instances, busy=(), source: str | None = None) -> GpuPlan:
    """Steps that bring one GPU to ``layout``.

    :param instances: ``(profile name, start)`` of its GPU instances now.
    :param busy: reasons it is in use (Placement allocations, servers in
        libvirt, whole-GPU passthrough): then nothing may change.
    """
    plan = GpuPlan(pci_address, model, layout, source)
    if layout is None:
        return plan
    instances = sorted(instances)
    if mig_current:
        have = {}
        for name, _start in instances:
            have[name] = have.get(name, 0) + 1
        if have == dict(layout.counts):
            return plan        # the layout holds, wherever its instances
        for name, start in instances:
            plan.steps.append(('destroy', (name, start)))
    elif mig_pending:
        plan.pending.append('MIG mode is enabled but pending: the GPU '
                            'needs a reset (or the host a reboot)')
    else:
        plan.steps.append(('enable', None))
    for profile, start in layout.placements:
        plan.steps.append(('create', (profile.name, start)))
    if plan.pending:
        plan.pending.append('then: ' + ', '.join(plan.describe_steps()))
        plan.steps = []
    plan.blocked.extend(busy)
    return plan


def layouts_for_host(conf, models) -> tuple[dict, list[str]]:
    """This host's layouts of ``models`` for ``nova-conf``, and notes.

    model -> profile counts: ``[mig] host_layouts`` for ``[DEFAULT] host``
    over ``layouts``.  An ``aggregate_layouts`` value needs the host's
    Placement aggregates, which only the agent reads (``mig plan`` shows
    them): such a model gets no layout here, and a note says so.
    """
    from gpu_nova_ext.agent import override_scope
    hosts = parse_scoped_layouts(conf.mig.host_layouts, 'host_layouts',
                                 'host')
    chooser = override_scope.Chooser(
        conf.host, parse_layouts(conf.mig.layouts),
        parse_scoped_layouts(conf.mig.aggregate_layouts,
                             'aggregate_layouts', 'aggregate'),
        hosts.get(conf.host, {}))
    layouts, notes = {}, []
    for model in sorted(m for m in set(models) if m):
        choice = chooser.choose(model, None)
        if choice.problem:
            notes.append('GPU model %s: not written from a MIG layout: %s; '
                         'gpu-nova-ext mig plan (which reads them) shows '
                         'its layout; its GPUs\' current vGPU types are '
                         'offered.' % (model, choice.problem))
        elif choice.value is not None:
            layouts[model] = choice.value.counts
    return layouts, notes
