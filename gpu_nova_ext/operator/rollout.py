# SPDX-License-Identifier: Apache-2.0

"""Driver roll-outs: in which batches to upgrade GPU hosts, and whether a
drained host runs the expected driver branch again.

Pure functions of an :class:`~gpu_nova_ext.operator.audit.AuditReport`
(its driver view: the live state's driver version, else the
``CUSTOM_GPU_DRIVER_<MAJOR>`` trait of the GPU's providers).
"""
import collections
import dataclasses
import datetime
import math

from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import live_state


def branch(driver: str | None) -> str | None:
    """``550`` of ``550.54.15``; a branch stays a branch."""
    return driver.split('.')[0] if driver else None


@dataclasses.dataclass
class Batch:
    hosts: list[str]
    down: dict[str, int]        # capacity out of service by pool
    over_limit: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class RolloutPlan:
    batches: list[Batch]
    totals: dict[str, int]      # capacity by pool (of the hosts in scope)
    allowed: dict[str, int]     # capacity that may be down at once
    done: list[str]             # hosts already on the target branch
    notes: list[str]


def plan(report: audit.AuditReport, max_unavailable_pct: float,
         hosts: set[str] | None = None, model: str | None = None,
         target_branch: str | None = None) -> RolloutPlan:
    """Batches of hosts to upgrade one after the other.

    No pool of GPUs (one model in one mode: ``A100_80GB_PCIE vgpu``) loses
    more than ``max_unavailable_pct`` percent of its capacity at once.
    Capacity is Placement's inventory: vGPUs of vGPU GPUs, whole GPUs of
    passed-through ones.

    :param hosts: only these hosts (an aggregate); None: all GPU hosts
    :param model: only hosts with GPUs of this model (a prefix at a ``_``
        boundary, as ``gpu:model``)
    :param target_branch: hosts whose GPUs all run it already are left out
    """
    by_host: dict[str, collections.Counter] = collections.defaultdict(
        collections.Counter)
    branches: dict[str, set] = collections.defaultdict(set)
    for g in report.gpus:
        if hosts is not None and g.host not in hosts:
            continue
        by_host[g.host][pool(g)] += g.total
        branches[g.host].add(branch(g.driver))
    if model:
        by_host = {h: c for h, c in by_host.items()
                   if any(_model_matches(p.split()[0], model) for p in c)}
    totals: collections.Counter = collections.Counter()
    for counts in by_host.values():
        totals.update(counts)
    done = sorted(h for h in by_host
                  if target_branch and branches[h] == {target_branch})
    allowed = {m: math.floor(n * max_unavailable_pct / 100.0)
               for m, n in totals.items()}
    notes = []
    batches: list[Batch] = []
    # biggest hosts first: they are the hardest to fit
    todo = sorted((h for h in by_host if h not in done),
                  key=lambda h: (-sum(by_host[h].values()), h))
    for host in todo:
        counts = by_host[host]
        for batch in batches:
            if all(batch.down.get(m, 0) + n <= allowed[m]
                   for m, n in counts.items()):
                batch.hosts.append(host)
                for m, n in counts.items():
                    batch.down[m] = batch.down.get(m, 0) + n
                break
        else:
            over = sorted(m for m, n in counts.items() if n > allowed[m])
            batches.append(Batch(hosts=[host], down=dict(counts),
                                 over_limit=over))
            for m in over:
                notes.append(
                    '%s alone holds %d of %d of %s capacity, more than '
                    '%g%%: it gets a batch of its own and %s capacity drops '
                    'below the limit while it is upgraded.'
                    % (host, counts[m], totals[m], m, max_unavailable_pct,
                       m))
    for b in batches:
        b.hosts.sort()
    if not by_host:
        notes.append('no GPU host matches (model %s, %s).' % (
            model or 'any', 'the given hosts' if hosts is not None
            else 'all hosts'))
    unknown = sorted(h for h in by_host if None in branches[h])
    if unknown:
        notes.append('driver unknown on %s (no CUSTOM_GPU_DRIVER_* trait, '
                     'no live state).' % ', '.join(unknown))
    return RolloutPlan(batches=batches, totals=dict(totals), allowed=allowed,
                       done=done, notes=notes)


def pool(gpu: audit.GpuView) -> str:
    """``MODEL mode``: GPUs that can stand in for each other."""
    return '%s %s' % (gpu.model, gpu.mode)


def _model_matches(have: str, want: str) -> bool:
    want = want.upper()
    return have == want or have.startswith(want + '_')


@dataclasses.dataclass
class UndrainCheck:
    """Whether a drained host may take servers again, and what to do."""

    problems: list[str]         # why not (empty: it may)
    todo: list[str]             # what still has to change, in order


def undrain_check(providers: list[audit.ProviderView], state: dict | None,
                  host: str, expected: str, live: bool = False
                  ) -> UndrainCheck:
    """Whether every GPU of ``host`` runs driver branch ``expected``.

    The driver a GPU runs is the one in its agent's ``state`` (what NVML
    or sysfs read on the host: the live payload, or the host's
    ``CUSTOM_GPU_HOST_DRIVER_*`` traits the agent keeps on the compute
    node provider, :func:`live_state.placement_states`, refused when
    stale), not the GPU providers' driver trait: on the
    PCI-in-Placement providers of passthrough and vendor-VFIO hosts that
    trait is a tag of the ``[pci] device_spec`` which ``gpu-nova-ext
    nova-conf`` generated, and it changes only when the drop-in is
    regenerated and nova-compute restarted; on the libvirt pGPU providers
    of vGPU hosts (and the agent's own in ``inventory`` mode) the agent
    rewrites it at its next cycle.  Both must say ``expected`` before the
    host takes servers again: flavors with ``gpu:driver`` select by the
    trait.

    :param live: ``state`` was listened for on the message bus (else read
        from Placement): what a missing state means.
    """
    report = audit.build_report(providers, {host: state} if state else {})
    gpus = [g for g in report.gpus if g.host == host]
    names = {p.uuid: p.name for p in providers}
    problems: list[str] = []
    todo: list[str] = []
    if not gpus:
        return UndrainCheck(['no GPU of %s in Placement' % host],
                            ['check the host name (nova-compute\'s) and '
                             'that gpu-nova-agent runs there'])
    if state is None and live:
        return UndrainCheck(
            ['no live GPU state from gpu-nova-agent on %s, so the driver '
             'its GPUs run is unknown' % host],
            ['start gpu-nova-agent on %s (it casts its state at start); '
             'check that this command\'s transport_url is the '
             'schedulers\', or give it more --state-wait' % host])
    if state is None:
        return UndrainCheck(
            ['no GPU state that gpu-nova-agent on %s published in '
             'Placement, so the driver its GPUs run is unknown' % host],
            ['start (or upgrade) gpu-nova-agent on %s: at each cycle it '
             'keeps its state on the compute node provider '
             '(CUSTOM_GPU_HOST_*); or give --state-wait with a '
             '--config-file whose transport_url is the schedulers\'' % host])
    if state.get('stale'):
        return UndrainCheck(
            ['the GPU state gpu-nova-agent on %s published is stale (%s)'
             % (host, live_state.describe(state))],
            ['check that gpu-nova-agent runs on %s and reaches Placement '
             '(it confirms its state at least every %d min)' % (
                 host, naming.HOST_REPORTED_REFRESH
                 // datetime.timedelta(minutes=1))])
    old, lags = driver_lags(state, expected)
    problems.extend(lags)
    if old:
        todo.append('install driver branch %s on %s and load it (a reboot '
                    'once the host holds no server: drain --all-servers), '
                    'then restart gpu-nova-agent' % (expected, host))
    device_spec, agent = [], []
    for g in gpus:
        if g.address in old or g.trait_driver in (None, expected):
            continue
        pci = any(_is_pci_provider(names.get(uuid, ''), host)
                  for uuid in g.providers)
        problems.append('Placement says GPU %s runs %s (%s)' % (
            g.address, g.trait_driver,
            'a [pci] device_spec tag' if pci else 'the agent\'s trait'))
        (device_spec if pci else agent).append(g.address)
    if device_spec:
        todo.append('regenerate the nova-conf drop-in on %s (gpu-nova-ext '
                    'nova-conf, as at install) and restart nova-compute '
                    'there: its [pci] device_spec still tags driver %s'
                    % (host, ', '.join(sorted(
                        {g.trait_driver for g in gpus
                         if g.address in device_spec}))))
    if agent:
        todo.append('wait for gpu-nova-agent\'s next cycle on %s ([agent] '
                    'report_interval), which rewrites the driver trait, or '
                    'run gpu-nova-ext report --once there' % host)
    return UndrainCheck(problems, todo)


def driver_lags(state: dict, expected: str) -> tuple[list[str], list[str]]:
    """(addresses, lines): the GPUs of ``state`` not on branch ``expected``.

    Read from Placement, a host whose GPUs run several branches has no
    driver per GPU: one line names the branches, and every GPU lags.
    """
    gpus = state.get('gpus', [])
    branches = state.get('driver_branches') or []
    if live_state.source_of(state) == live_state.PLACEMENT and (
            len(branches) > 1):
        return (sorted(g['pci_address'] for g in gpus),
                ['its GPUs run driver branches %s (%s)' % (
                    ', '.join(branches), live_state.describe(state))])
    running = {g['pci_address']: g.get('driver_version') for g in gpus}
    old = sorted(a for a, d in running.items() if branch(d) != expected)
    return old, ['GPU %s runs %s' % (a, running[a] or 'an unknown driver')
                 for a in old]


def _is_pci_provider(name: str, host: str) -> bool:
    """Whether ``name`` is a PCI-in-Placement provider of ``host``.

    Named after the device, or for the VFs of a vendor-VFIO GPU after
    their PF, by nova-compute (``naming.pci_provider_name``).
    """
    address = audit.provider_address(name)
    return bool(address) and name == naming.pci_provider_name(host, address)


def driver_mismatches(report: audit.AuditReport, host: str,
                      expected: str) -> list[str]:
    """What stops ``host`` from being re-enabled.

    One line per GPU whose driver branch is not ``expected``;
    ``['no GPU ...']`` when the host has none.
    """
    gpus = [g for g in report.gpus if g.host == host]
    if not gpus:
        return ['no GPU of %s in Placement' % host]
    return ['GPU %s runs %s' % (g.address or g.providers[0],
                                g.driver or 'an unknown driver')
            for g in gpus if branch(g.driver) != expected]
