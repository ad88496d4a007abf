# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu explain``: why a GPU server lands where it does, or
nowhere.

Explain is not a second copy of the scheduling rules: it takes the
cloud's snapshot (:mod:`gpu_nova_ext.operator.snapshot`: hosts, GPUs
with the health their agents published, GPU reservations, GPU quotas),
replays the current servers in the simulator (design doc: Simulator) and
then runs ONE request of the flavor and project through the simulator's
scheduling path without claiming it
(:meth:`gpu_nova_ext.simulate.scheduling.Scheduling.explain`): nova-api's
unified-limits check, Nova's request spec and request filters, the
Placement query on the embedded Placement, Nova's filter and weight
handlers with our filters and weighers.  Every compute host gets a row:
the rule that removed it (Placement, a Nova filter, one of ours with the
GPUs whose facts failed) or its rank with each weigher's share.

Where Placement offered no candidate for a host, the row says which
resource or trait of the request the host's providers lack, from the
snapshot's inventories, usages and traits (:func:`placement_shortfall`).
A quota refusal is not per host: :attr:`Answer.quota` says it once.
"""
import copy
import dataclasses
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import capacity
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import snapshot as snap_mod
from gpu_nova_ext.simulate import nova_conf_file

LOG = logging.getLogger(__name__)

#: what explain does not account for (the first line on stderr)
UNACCOUNTED = (
    "GPU health changes since each agent's last report in Placement, and "
    'GPU metrics (metric weighers see idle GPUs)',
    'whether Nova enforces unified limits ([quota] driver): the '
    "snapshot's Keystone GPU limits are enforced",
)
REMOVED = 'removed'
RANK = 'rank %d'
UNKNOWN = 'unknown'
PLACEMENT = 'Placement'
QUOTA = 'quota'
#: the request's flavor when the snapshot has none like it by its name
REQUEST_FLAVOR = 'explain-request'
#: a forbidden trait Nova's request filter adds: its meaning for a row
_FORBIDDEN_MEANING = {
    'COMPUTE_STATUS_DISABLED': 'its compute service is disabled',
}


@dataclasses.dataclass(kw_only=True, slots=True)
class Request:
    """What to explain: a flavor and the project that asks."""

    flavor: cloud_facts.FlavorFact
    project: str | None = None
    #: the server whose request this is (``--server``), if any
    server: cloud_facts.ServerFact | None = None


@dataclasses.dataclass(kw_only=True, slots=True)
class Row:
    host: str
    #: ``removed``, ``rank N`` or ``unknown``
    verdict: str
    #: the filter, ``Placement``, or '' for a ranked host
    rule: str = ''
    reason: str = ''
    weight: float | None = None
    #: weigher -> its normalized weight x multiplier
    weights: dict[str, float] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(kw_only=True, slots=True)
class Answer:
    rows: list[Row]
    #: nova-api's quota refusal for the request, None when it passes
    quota: str | None
    #: what the answer leaves out or where the replay differed
    notes: list[str]

    @property
    def top(self) -> str | None:
        """The host the scheduler picks (rank 1), None when none."""
        return next((r.host for r in self.rows if r.verdict == RANK % 1),
                    None)


# -- what to explain -------------------------------------------------------

def request_of_flavor(facts: cloud_facts.CloudFacts, name: str,
                      project: str | None) -> Request:
    """A request of Nova's flavor ``name`` (name or id)."""
    for flavor in facts.flavors:
        if name == flavor.name:
            return Request(flavor=flavor, project=project)
    raise exception.InvalidArgument(
        argument='--flavor', value=name,
        reason='no such flavor in Nova (flavors: %s); give a name from '
               'openstack flavor list' % ', '.join(
                   sorted(f.name for f in facts.flavors)[:20]))


def request_of_server(facts: cloud_facts.CloudFacts, name_or_id: str,
                      project: str | None) -> Request:
    """The request of a server: its own flavor and its project.

    The flavor as Nova embedded it in the server, extra specs included.
    """
    found = [s for s in facts.servers if s.id == name_or_id]
    found = found or [s for s in facts.servers if s.name == name_or_id]
    if not found:
        raise exception.InvalidArgument(
            argument='--server', value=name_or_id,
            reason='no such server in Nova (of any project); give a name '
                   'or id from openstack server list --all-projects')
    if len(found) > 1:
        raise exception.InvalidArgument(
            argument='--server', value=name_or_id,
            reason='%d servers have that name; give its id (%s)' % (
                len(found), ', '.join(s.id for s in found[:5])))
    server = found[0]
    flavor = server.flavor
    if flavor.get('vcpus') is None:
        raise exception.InvalidArgument(
            argument='--server', value=name_or_id,
            reason='Nova did not show its flavor (compute API '
                   'microversion 2.47 or newer embeds it); use --flavor')
    return Request(
        flavor=cloud_facts.FlavorFact(
            name=flavor.get('name') or REQUEST_FLAVOR,
            vcpus=int(flavor['vcpus']), ram=int(flavor['ram']),
            disk=int(flavor.get('disk') or 0),
            extra_specs=dict(flavor.get('extra_specs') or {})),
        project=project or server.project_id, server=server)


def without_server(facts: cloud_facts.CloudFacts,
                   server: cloud_facts.ServerFact) -> cloud_facts.CloudFacts:
    """The facts without ``server``, whose request is explained afresh.

    What it holds now is not in the replay.
    """
    return dataclasses.replace(facts, servers=[
        s for s in facts.servers if s.id != server.id])


# -- the simulation ----------------------------------------------------------

def scenario_of(snap: snap_mod.Snapshot, flavor: cloud_facts.FlavorFact
                ) -> tuple[dict[str, Any], str]:
    """The snapshot's scenario (no workload) and the request's flavor name.

    The flavor keeps its name when the snapshot's flavor of that name is
    the same; else it is added as :data:`REQUEST_FLAVOR`.
    """
    data = copy.deepcopy(snap.data)
    data.pop('workload', None)
    if not data.get('boots'):
        # a scenario has steps: with no server to replay, one that
        # deletes nothing
        data['boots'] = [{'delete': REQUEST_FLAVOR}]
    entry = snap_mod.flavor_entry(REQUEST_FLAVOR, flavor.vcpus, flavor.ram,
                                  flavor.disk, flavor.extra_specs)
    name = snap_mod.safe_name(flavor.name)
    for existing in data['flavors']:
        if name and existing['name'] == name and dict(
                existing, name=REQUEST_FLAVOR) == entry:
            return data, name
    data['flavors'] = [f for f in data['flavors']
                       if f['name'] != REQUEST_FLAVOR] + [entry]
    return data, REQUEST_FLAVOR


def unaccounted(taken: nova_conf_file.Taken | None) -> tuple[str, ...]:
    """What an answer does not account for, with or without --nova-conf.

    With a ``[quota] driver`` from the files, the quota line goes too.
    """
    if taken is None:
        return (UNACCOUNTED[0], nova_conf_file.NOT_GIVEN) + UNACCOUNTED[1:]
    if 'driver' in taken.options.get('quota', {}):
        return UNACCOUNTED[:1]
    return UNACCOUNTED


def simulate(snap: snap_mod.Snapshot, request: Request,
             taken: nova_conf_file.Taken | None = None):
    """Replay the snapshot, then explain one request.

    ``taken``: the schedulers' own options (--nova-conf).  Returns (the
    simulation's Result, the scheduling Explanation, the number of replay
    steps).
    """
    runner, scn = snap_mod.simulator('explain')
    data, flavor = scenario_of(snap, request.flavor)
    scenario = scn.from_dict(data, '<snapshot %s>' % snap.taken_at)
    if taken is not None:
        scenario = nova_conf_file.apply(scenario, taken)

    explained = []

    def explain(sim) -> None:
        # the replay done, the request, while Placement still runs
        explained.append(sim.sched.explain(sim.scenario.flavors[flavor],
                                           request.project))

    result = runner.Simulation(scenario, after_steps=explain).run()
    return result, explained[0], len(scenario.steps)


# -- the rows ---------------------------------------------------------------

def placement_shortfall(facts: cloud_facts.CloudFacts, root_uuid: str,
                        explanation) -> str:
    """Why Placement offered no candidate on one host.

    As far as the snapshot's inventories, usages and traits tell.  No I/O.
    """
    tree = [v for v in facts.providers if v.root_uuid == root_uuid]
    root_inv = facts.root_inventories.get(root_uuid) or {}
    root_used = facts.root_usages.get(root_uuid) or {}
    short = []
    for rc, amount in sorted(explanation.resources.items()):
        free, offered = 0, False
        for view in tree:
            if view.parent_uuid is None:
                inv, used = root_inv.get(rc), root_used.get(rc, 0)
            else:
                inv, used = view.inventories.get(rc), view.usages.get(rc, 0)
            if inv:
                offered = True
                free += max(snap_mod.offered(inv) - used, 0)
        if not offered:
            short.append('no %s inventory (%d asked)' % (rc, amount))
        elif free < amount:
            short.append('%s: %d free, %d asked' % (rc, free, amount))
    traits = {t for v in tree for t in v.traits}
    for trait in sorted(explanation.required_traits - traits):
        short.append('required trait %s on none of its providers' % trait)
    for trait in sorted(explanation.forbidden_traits & traits):
        short.append(_FORBIDDEN_MEANING.get(
            trait, 'it has the forbidden trait %s' % trait))
    if short:
        return '; '.join(short)
    if explanation.member_of:
        return ('the request asks for Placement aggregates %s (Nova\'s '
                'request filters), which the host is not in' % '; '.join(
                    ','.join(a) for a in explanation.member_of))
    if explanation.limit and explanation.candidates >= explanation.limit:
        return ('Placement cut its answer at [scheduler] '
                'max_placement_results=%d candidates before this host'
                % explanation.limit)
    return ('no allocation candidate, though its providers have each '
            'resource and trait of the request: a request group needs '
            'them from one provider')


def removal_reason(removal, addresses: dict[str, str]) -> str:
    """A filter's removal in words, the cloud's GPU addresses in it."""
    parts = ['needs %s' % removal.need] if removal.need else []
    for gpus, text in removal.failing:
        parts.append('GPU %s: %s' % (
            ', '.join(addresses.get(a, a) for a in gpus) or '?', text))
    return '; '.join(parts)


def rows_of(facts: cloud_facts.CloudFacts, snap: snap_mod.Snapshot,
            explanation) -> list[Row]:
    """A row per compute host: ranked ones best first, then the rest."""
    simulated = {h['name'] for h in snap.data['hosts']}
    roots = {v.name: v.uuid for v in facts.providers
             if v.parent_uuid is None and 'VCPU' in (
                 facts.root_inventories.get(v.uuid) or {})}
    rows = []
    for rank, host in enumerate(explanation.ranked, 1):
        rows.append(Row(
            host=host, verdict=RANK % rank,
            weight=round(explanation.totals.get(host, 0.0), 4),
            weights={k: round(v, 4) for k, v in sorted(
                explanation.weights.get(host, {}).items())}))
    offered = set(explanation.offered)
    for host in sorted(roots):
        if host in explanation.ranked:
            continue
        if host not in simulated:
            rows.append(Row(host=host, verdict=UNKNOWN, reason=(
                'not in the snapshot (see the notes)')))
        elif host in explanation.removed:
            removal = explanation.removed[host]
            rows.append(Row(host=host, verdict=REMOVED, rule=removal.filter,
                            reason=removal_reason(
                                removal, snap.addresses.get(host, {}))))
        elif host not in offered:
            rows.append(Row(host=host, verdict=REMOVED, rule=PLACEMENT,
                            reason=placement_shortfall(
                                facts, roots[host], explanation)))
        else:
            rows.append(Row(host=host, verdict=UNKNOWN, reason=(
                'offered by Placement, neither removed nor ranked')))
    return rows


def answer(facts: cloud_facts.CloudFacts, snap: snap_mod.Snapshot,
           request: Request,
           nova_conf: tuple[nova_conf_file.Taken, list[str]] | None = None
           ) -> Answer:
    """Explain ``request`` against the cloud ``facts``/``snap`` describe.

    For ``--server``, give the facts and snapshot without the server
    (:func:`without_server`).  ``nova_conf``: what
    :func:`nova_conf_file.read` took and from which files.
    """
    taken, paths = nova_conf or (None, [])
    LOG.debug('explain: flavor %(flavor)s, project %(project)s',
              {'flavor': request.flavor.name, 'project': request.project})
    result, explanation, replay = simulate(snap, request, taken)
    rows = rows_of(facts, snap, explanation)
    notes = capacity.replay_notes(
        result, replay, 'replay', 'so their hosts look emptier here than '
        'they are')
    if explanation.missing_state:
        notes.append('hosts without live GPU state in the simulation: %s'
                     % ', '.join(sorted(explanation.missing_state)))
    if taken is not None:
        notes += nova_conf_file.notes(taken, paths)
    notes += ['not represented in the snapshot: %s' % line
              for line in snap.dropped]
    return Answer(rows=rows, quota=explanation.quota, notes=notes)
