# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu capacity``: how many more servers of a flavor fit now.

Capacity is not a second copy of the scheduling rules: it takes the
cloud's snapshot (:mod:`gpu_nova_ext.operator.snapshot`) and plays it in
the simulator (design doc: Simulator), whose placement loop is Nova's own
request spec, Placement query, filter and weigher handlers with our
filters and weighers, on an embedded Placement that holds the cloud's
inventories.  The current servers are booted first, then the flavor is
booted until the first NoValidHost: what landed is the answer, counted
per GPU model and host aggregate of where it landed.  One flavor per run,
each from the same snapshot: capacities of several flavors are each "if
only this flavor came".

What the answer does not account for is in :data:`UNACCOUNTED` (and each
row says when the replay of the current servers differed from the cloud).
"""
import copy
import dataclasses
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import snapshot as snap_mod
from gpu_nova_ext.simulate import nova_conf_file

LOG = logging.getLogger(__name__)

#: most servers one flavor's fill boots (an answer at the bound is "at
#: least")
DEFAULT_MAX_SERVERS = snap_mod.FILL_MAX_SERVERS
#: what capacity does not account for (said with every answer)
UNACCOUNTED = (
    "GPU health changes since each agent's last report in Placement, and "
    "GPU metrics (the GPUs' health traits count; metrics are idle)",
    'quotas (the count is what the hosts take: openstack gpu explain '
    "--flavor F --project P says a project's quota), and GPU "
    'reservations count as kept from the servers counted (they are of no '
    'project that reserved anything)',
)
NO_AGGREGATE = '-'


@dataclasses.dataclass(kw_only=True, slots=True)
class Row:
    """Servers of ``flavor`` that fit on GPUs of ``model`` in ``aggregate``."""

    flavor: str
    model: str
    aggregate: str
    fits: int
    #: the fill stopped at the bound: at least ``fits``
    bounded: bool = False


@dataclasses.dataclass(kw_only=True, slots=True)
class Answer:
    rows: list[Row]
    #: lines said beside the rows (replay differences, what was left out)
    notes: list[str]


def gpu_flavors(snap: snap_mod.Snapshot) -> list[str]:
    return [f['name'] for f in snap.data['flavors']
            if snap_mod.is_gpu_flavor(f.get('extra_specs') or {})]


def check_flavors(snap: snap_mod.Snapshot, names: list[str]) -> list[str]:
    """The flavors to count: ``names``, or every GPU flavor.

    :raises InvalidArgument: an unknown flavor or one that asks no GPU.
    """
    gpu = gpu_flavors(snap)
    for name in names:
        if name not in gpu:
            known = {f['name'] for f in snap.data['flavors']}
            raise exception.InvalidArgument(
                argument='--flavor', value=name,
                reason='%s; GPU flavors: %s' % (
                    'it asks no GPU (capacity counts GPU flavors)'
                    if name in known else 'no such flavor in Nova',
                    ', '.join(gpu) or 'none'))
    if not names and not gpu:
        raise exception.InvalidArgument(
            argument='--flavor', value='(none given)',
            reason='Nova has no GPU flavor; create one (openstack gpu '
                   'flavor create) or name one with --flavor')
    return list(names) or gpu


def scenario_of(snap: snap_mod.Snapshot, flavor: str,
                max_servers: int) -> dict[str, Any]:
    """The snapshot's scenario filling ``flavor`` until NoValidHost."""
    data = copy.deepcopy(snap.data)
    # what the hosts take, not what a project may ask (UNACCOUNTED)
    data.pop('quotas', None)
    data['workload'] = {'flavors': {flavor: 1}, 'until': 'first_failure',
                        'max_servers': max_servers}
    return data


def unaccounted(taken: nova_conf_file.Taken | None) -> tuple[str, ...]:
    """What an answer does not account for, with or without --nova-conf."""
    return UNACCOUNTED + (() if taken else (nova_conf_file.NOT_GIVEN,))


def fill(snap: snap_mod.Snapshot, flavor: str, aggregates: dict,
         max_servers: int = DEFAULT_MAX_SERVERS, progress=None,
         taken: nova_conf_file.Taken | None = None
         ) -> tuple[list[Row], list[str]]:
    """Rows of one flavor and the notes of its replay.

    ``aggregates``: host -> aggregate names (hosts in none: ``-``);
    ``taken``: the schedulers' own options (--nova-conf).
    """
    runner, scn = snap_mod.simulator('capacity')
    scenario = scn.from_dict(scenario_of(snap, flavor, max_servers),
                             '<snapshot %s>' % snap.taken_at)
    if taken is not None:
        scenario = nova_conf_file.apply(scenario, taken)
    result = runner.Simulation(scenario, progress=progress).run()
    models = {(o.host, o.gpu): o.model for o in result.occupancy}
    replay = len(scenario.steps)
    counts: dict[tuple[str, str], int] = {}
    landed = 0
    for server in result.servers:
        if server.step < replay or server.error:
            continue
        landed += 1
        model = ','.join(sorted({models.get((server.host, g)) or '?'
                                 for g in server.gpus})) or '-'
        for agg in aggregates.get(server.host) or [NO_AGGREGATE]:
            key = (model, agg)
            counts[key] = counts.get(key, 0) + 1
    bounded = landed >= max_servers
    rows = [Row(flavor=flavor, model=m, aggregate=a, fits=n,
                bounded=bounded) for (m, a), n in sorted(counts.items())]
    if not rows:
        rows = [Row(flavor=flavor, model='-', aggregate=NO_AGGREGATE,
                    fits=0)]
    notes = replay_notes(result, replay, flavor, 'this capacity is too '
                         'high')
    if bounded:
        notes.append('%s: stopped at %d servers (--max-servers): at least '
                     'that many fit' % (flavor, max_servers))
    return rows, notes


def replay_notes(result, replay: int, label: str,
                 if_failed: str) -> list[str]:
    """What differed when the simulator replayed the current servers.

    Each is asked for the host it runs on (the snapshot's ``host:``), so
    a difference is a server that found no host there.  ``replay``: the
    scenario's steps that replay them (boots of the snapshot);
    ``if_failed``: what that means for the answer.
    """
    failed = [s.server for s in result.servers
              if s.step < replay and s.error]
    if not failed:
        return []
    return ['%s: %d of the %d current servers found no host when replayed '
            'on the host they run on (%s): the cloud holds more than the '
            'snapshot could replay, %s' % (
                label, len(failed), replay, ', '.join(failed[:5]),
                if_failed)]


def host_aggregates(facts: cloud_facts.CloudFacts) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, (hosts, _metadata) in sorted(facts.aggregates.items()):
        for host in hosts:
            out.setdefault(host, []).append(name)
    return out


def answer(facts: cloud_facts.CloudFacts, snap: snap_mod.Snapshot,
           flavors: list[str], aggregate: str | None = None,
           max_servers: int = DEFAULT_MAX_SERVERS,
           nova_conf: tuple[nova_conf_file.Taken, list[str]] | None = None
           ) -> Answer:
    """Capacity of each flavor (of ``aggregate`` only, when given).

    With ``aggregate``, the servers that land on its hosts count, and
    only its rows are kept.  ``nova_conf``: what
    :func:`nova_conf_file.read` took and from which files.
    """
    taken, paths = nova_conf or (None, [])
    names = check_flavors(snap, flavors)
    by_host = host_aggregates(facts)
    if aggregate is not None:
        by_host = {h: [a for a in aggs if a == aggregate]
                   for h, aggs in by_host.items()}
    rows: list[Row] = []
    notes: list[str] = []
    for name in names:
        LOG.debug('capacity: filling flavor %(flavor)s', {'flavor': name})
        flavor_rows, flavor_notes = fill(snap, name, by_host, max_servers,
                                         taken=taken)
        if aggregate is not None:
            flavor_rows = ([r for r in flavor_rows
                            if r.aggregate == aggregate] or
                           [Row(flavor=name, model='-', aggregate=aggregate,
                                fits=0)])
        rows += flavor_rows
        notes += flavor_notes
    if taken is not None:
        notes += nova_conf_file.notes(taken, paths)
    notes += ['not represented in the snapshot: %s' % line
              for line in snap.dropped]
    notes += ['not accounted for: %s' % line for line in unaccounted(taken)]
    return Answer(rows=rows, notes=notes)
