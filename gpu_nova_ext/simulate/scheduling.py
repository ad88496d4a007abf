# SPDX-License-Identifier: Apache-2.0

"""One boot through Nova's scheduling path, and one delete.

What ``SchedulerManager._schedule`` does for a one-server request, with
Nova's own code (:mod:`.nova_request`, :mod:`.nova_host_states`,
:mod:`.nova_claims`): the request spec,
Nova's request filters, the Placement query (at most ``[scheduler]
max_placement_results`` candidates, as Nova asks), a HostState per host
Placement returned, the filter and weight handlers, the claim, and
``consume_from_request``.

Like Nova's HostManager, HostStates are kept between requests and rebuilt
from the host's ComputeNode record only when the host changed (a server
built or deleted there).

:meth:`Scheduling.explain` runs one request down the same path without
claiming (``openstack gpu explain``): what Placement offered, which
filter removed each other host and why, and the ranking with each
weigher's share.
"""
import dataclasses
import uuid

from oslo_log import log as logging

from gpu_nova_ext.simulate import nova_claims
from gpu_nova_ext.simulate import nova_host_states
from gpu_nova_ext.simulate import nova_request
from gpu_nova_ext.simulate import result as res
from gpu_nova_ext.simulate import scenario as scn

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True, slots=True)
class Explanation:
    """One request through the scheduling path, not claimed."""

    #: nova-api's quota refusal (Nova's message), None when it passes
    quota: str | None = None
    #: the Placement query's resources (resource class -> amount)
    resources: dict[str, int] = dataclasses.field(default_factory=dict)
    required_traits: set[str] = dataclasses.field(default_factory=set)
    forbidden_traits: set[str] = dataclasses.field(default_factory=set)
    #: required aggregates (Nova's request filters), lists of UUIDs any of
    member_of: list[list[str]] = dataclasses.field(default_factory=list)
    #: hosts Placement returned a candidate for
    offered: list[str] = dataclasses.field(default_factory=list)
    #: how many candidates Placement returned, and Nova's limit on them
    candidates: int = 0
    limit: int = 0
    #: host -> the filter that removed it and why
    removed: dict = dataclasses.field(default_factory=dict)
    #: hosts that passed every filter, best first
    ranked: list[str] = dataclasses.field(default_factory=list)
    #: host -> weigher -> normalized weight x multiplier
    weights: dict[str, dict[str, float]] = dataclasses.field(
        default_factory=dict)
    totals: dict[str, float] = dataclasses.field(default_factory=dict)
    #: hosts offered whose GPU state the scheduler's cache lacked
    missing_state: list[str] = dataclasses.field(default_factory=list)


class Scheduling:
    """Boots and deletes servers on the simulated hosts."""

    def __init__(self, scenario: scn.Scenario, scheduler, hosts: dict,
                 cache, client):
        self.scenario = scenario
        self.scheduler = scheduler
        self.hosts = hosts
        self.cache = cache
        self.client = client
        self.ctx = nova_request.admin_context()
        self.aggregates = nova_host_states.aggregates(scenario)
        self.by_root = {}
        self._states: dict[str, object] = {}
        #: hosts Placement offered for the last boot whose GPU state the
        #: scheduler's cache did not have (GPU filters exclude them)
        self.missing_state: list[str] = []
        #: simulate/quotas.py's Quotas when the scenario has ``quotas:``
        self.quotas = None

    def _roots(self) -> dict:
        if len(self.by_root) != len(self.hosts):
            self.by_root = {h.root_uuid: h for h in self.hosts.values()}
        return self.by_root

    def _state(self, host, candidates: list):
        state = self._states.get(host.name)
        if state is None:
            compute = nova_host_states.compute_node(
                host.spec, host.root_uuid, host.used, host.pci_pools)
            state = self._states[host.name] = nova_host_states.host_state(
                compute, [], self.aggregates.get(host.name))
        nova_host_states.set_candidates(state, candidates)
        return state

    def changed(self, host_name: str) -> None:
        """The host's usage changed: rebuild its HostState next time."""
        self._states.pop(host_name, None)

    def boot(self, server: res.ServerResult, flavor: scn.Flavor,
             host: str | None = None, gpus: list[str] | None = None):
        """Schedule and claim ``server`` (on ``host`` when given).

        ``gpus`` (with ``host``): the server holds these GPUs of it, as a
        snapshot's server holds its GPUs in the cloud; the filters and
        weighers still judge the host, then the claim is the candidate
        with exactly those GPUs instead of the intra-host choice.

        Returns (host, instance uuid), or (None, None) with
        ``server.error`` set.
        """
        instance_uuid = str(uuid.uuid4())
        spec = nova_request.request_spec(self.ctx, flavor, instance_uuid)
        if server.project:
            spec.project_id = server.project
        if host is not None:
            nova_request.pin(spec, host, self.hosts[host].nodename)
        if self.quotas is not None:      # nova-api's, before scheduling
            server.error = self.quotas.check(spec)
            if server.error:
                server.quota = True
                return None, None
        state, alloc_req, ordered, error = self._schedule(
            spec, instance_uuid, gpus)
        if error:
            server.error = error
            return None, None
        host = self.hosts[state.host]
        self._explain(server, state, ordered, host)
        server.gpus = host.consume(flavor, alloc_req['allocations'],
                                   instance_uuid)
        self.changed(host.name)
        return host, instance_uuid

    def explain(self, flavor: scn.Flavor,
                project: str | None = None) -> Explanation:
        """Run one request of ``flavor`` through scheduling, unclaimed.

        nova-api's quota check (when the scenario has ``quotas:``), then
        the request spec, Nova's request filters, the Placement query and
        the filter and weight handlers, as :meth:`boot` runs them; a
        quota refusal is said and the hosts are still judged.
        """
        out = Explanation()
        spec = nova_request.request_spec(self.ctx, flavor,
                                         str(uuid.uuid4()))
        if project:
            spec.project_id = project
        if self.quotas is not None:
            out.quota = self.quotas.check(spec)
        nova_request.prefilter(self.ctx, spec)
        resources = nova_request.resource_request(self.ctx, spec)
        out.resources = dict(resources.merged_resources())
        out.required_traits = set(resources.all_required_traits)
        # ResourceRequest keeps its groups by suffix (no public list)
        for group in getattr(resources, '_rg_by_id', {}).values():
            out.forbidden_traits |= set(group.forbidden_traits or ())
        if spec.obj_attr_is_set('requested_destination') and (
                spec.requested_destination is not None and
                spec.requested_destination.obj_attr_is_set('aggregates')):
            out.member_of = [a.split(',') for a in (
                spec.requested_destination.aggregates or ())]
        out.limit = self.scheduler.conf.scheduler.max_placement_results
        answer = self.client.get_allocation_candidates(self.ctx, resources)
        alloc_reqs, summaries, _version = answer or (None, None, None)
        if not alloc_reqs:
            return out
        out.candidates = len(alloc_reqs)
        states = self._host_states(alloc_reqs, summaries)
        out.offered = [s.host for s in states]
        out.missing_state = list(self.missing_state)
        sched = self.scheduler
        sched.explaining = True
        try:
            sched.select(states, spec)
            out.removed = dict(sched.removals)
        finally:
            sched.explaining = False
            sched.removals.clear()
        out.ranked = list(sched.ranked)
        out.totals = dict(sched.total_weights)
        out.weights = {h: dict(w) for h, w in sched.weight_log.items()}
        # nothing consumed: the HostStates stay (the next request sets
        # their candidates afresh, as for a boot)
        return out

    def _host_states(self, alloc_reqs: list, summaries: dict) -> list:
        """A HostState per host Placement offered, with its candidates."""
        by_root: dict[str, list] = {}
        roots = self._roots()
        for ar in alloc_reqs:
            for rp in ar['allocations']:
                if rp in roots:
                    by_root.setdefault(rp, []).append(ar)
        states = []
        oldest = self.cache.oldest_live()
        self.missing_state = []
        for root, host in roots.items():
            if root in summaries:
                states.append(self._state(host, by_root.get(root, [])))
                record = self.cache.host_record(host.name)
                if record is None or record.received_at < oldest:
                    self.missing_state.append(host.name)
        return states

    def move(self, instance_uuid: str, flavor: scn.Flavor, source,
             cold: bool = False, project: str | None = None):
        """Migrate a server off ``source`` through the scheduler.

        As Nova's conductor does for a live or cold migration: the
        server's allocations go to a migration consumer
        (``replace_allocation_with_migration``:
        ``SchedulerReportClient.move_allocations``), the request spec
        ignores the source host (``LiveMigrationTask._find_destination``;
        ``API.resize`` for a cold migration unless ``[DEFAULT]
        allow_resize_to_same_host``), the scheduler claims for the server
        on the destination, and the source's allocations (the migration
        consumer's) are deleted when the move is done; on no valid host
        they go back to the server (``revert_allocation_for_migration``).

        The hosts themselves (mdevs, usage) are the caller's to change.
        Returns (destination host, its allocations, None) or (None, None,
        error).
        """
        ctx = self.ctx
        migration_uuid = str(uuid.uuid4())
        if not self.client.move_allocations(ctx, instance_uuid,
                                            migration_uuid):
            return None, None, ('Placement refused to move the allocations '
                                'of %s to its migration' % instance_uuid)
        spec = nova_request.request_spec(ctx, flavor, instance_uuid)
        if project:                  # the server's own (reservations)
            spec.project_id = project
        if not (cold and self.scheduler.conf.allow_resize_to_same_host):
            spec.ignore_hosts = [source.name]
        state, alloc_req, _, error = self._schedule(spec, instance_uuid)
        if error:
            self.client.move_allocations(ctx, migration_uuid, instance_uuid)
            return None, None, error
        self.client.delete_allocation_for_instance(
            ctx, migration_uuid, consumer_type='migration', force=True)
        self.changed(source.name)
        self.changed(state.host)
        return self.hosts[state.host], alloc_req['allocations'], None

    def _schedule(self, spec, instance_uuid: str,
                  gpus: list[str] | None = None):
        """``SchedulerManager._schedule`` for one server.

        Returns (HostState, allocation request, ordered hosts, None), or
        (None, None, None, error).
        """
        ctx = self.ctx
        nova_request.prefilter(ctx, spec)
        resources = nova_request.resource_request(
            ctx, spec, nova_request.ComputeNodes(self.hosts))
        answer = self.client.get_allocation_candidates(ctx, resources)
        alloc_reqs, summaries, version = answer or (None, None, None)
        self.missing_state = []
        if not alloc_reqs:
            asked = spec.obj_attr_is_set('requested_destination') and (
                spec.requested_destination)
            return None, None, None, (
                'No valid host: Placement has no allocation candidate for '
                '%s%s' % (_describe(resources), ' on %s (the boot asks for '
                          'it)' % asked.host if asked else ''))
        states = self._host_states(alloc_reqs, summaries)
        if spec.obj_attr_is_set('ignore_hosts') and spec.ignore_hosts:
            offered = len(states)
            states = strip_ignore_hosts(states, spec.ignore_hosts)
            if offered and not states:
                return None, None, None, (
                    'No valid host: Placement offered no host but %s'
                    % ', '.join(spec.ignore_hosts))
        ordered = self.scheduler.select(states, spec)
        if not ordered:
            return None, None, None, ('No valid host: %s'
                                      % self.scheduler.rejection())
        if gpus:
            pinned = self._on_gpus(ordered, gpus)
            if not pinned:
                return None, None, None, (
                    'No valid host: no allocation candidate of %s holds '
                    'exactly GPU(s) %s (the boot asks for them: full, '
                    'or their providers filtered out)' % (
                        ordered[0].host, ', '.join(gpus)))
            ordered[0].allocation_candidates = pinned
        for state in ordered:
            if not state.allocation_candidates:
                continue
            alloc_req = state.allocation_candidates[0]
            if nova_claims.claim(ctx, self.client, spec, instance_uuid,
                                 alloc_req, version):
                break
        else:
            return None, None, None, (
                'No valid host: the claim in Placement failed on every '
                'host that passed the filters')
        # as _schedule does before consume_from_request
        for group in spec.requested_resources:
            group.provider_uuids = alloc_req['mappings'][group.requester_id]
        state.consume_from_request(spec)
        return state, alloc_req, ordered, None

    def _on_gpus(self, ordered: list, gpus: list[str]) -> list:
        """The pinned host's candidates on exactly ``gpus``."""
        state = ordered[0]             # the boot's host: the only one
        host = self.hosts[state.host]
        want = set(gpus)
        return [ar for ar in state.allocation_candidates
                if {host.gpu_of_provider[rp] for rp in ar['allocations']
                    if rp in host.gpu_of_provider} == want]

    def _explain(self, server, state, ordered, host) -> None:
        sched = self.scheduler
        server.host = state.host
        server.weights = dict(sorted(
            sched.weight_log.get(state.host, {}).items()))
        server.weight = sched.total_weights.get(state.host)
        others = [s for s in ordered if s is not state]
        if others:
            server.runner_up = others[0].host
            server.runner_up_weights = dict(
                sched.weight_log.get(others[0].host, {}))
        for name, rps in sched.pruned.get(state.host, {}).items():
            gpus = sorted({host.gpu_of_provider[rp] for rp in rps
                           if rp in host.gpu_of_provider})
            if gpus:
                server.excluded[name] = gpus

    def delete(self, instance_uuid: str, host_name: str) -> None:
        """Free the server's allocations in Placement.

        As nova-compute's delete does, with Nova's report client.
        """
        self.client.delete_allocation_for_instance(
            self.ctx, instance_uuid, force=True)
        self.changed(host_name)


def strip_ignore_hosts(states: list, ignore: list[str]) -> list:
    """The hosts a request spec does not ignore.

    As ``HostManager.get_filtered_hosts`` strips ``ignore_hosts`` (host
    names compared case-insensitively) before any filter runs.
    """
    names = {name.lower() for name in ignore}
    return [s for s in states if s.host.lower() not in names]


def _describe(resources) -> str:
    """A ResourceRequest in a line: ``VCPU=8, MEMORY_MB=..., VGPU=1``."""
    parts = ['%s=%d' % kv for kv in resources.merged_resources().items()]
    parts += sorted(resources.all_required_traits)
    return ', '.join(parts)
