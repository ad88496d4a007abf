# SPDX-License-Identifier: Apache-2.0

"""A driver roll-out in the simulator: ``openstack gpu rollout run`` on the
simulated cloud, to see capacity and failed boots before doing it.

Design doc: Remediation, drains and driver roll-outs.

The plan is the command's: :func:`gpu_nova_ext.operator.rollout.plan` on
the audit of the simulated cloud (:func:`audit.collect` through a host's
Placement client, the agents' state payloads), kept in the command's
:class:`~gpu_nova_ext.operator.rollout_run.RunState`; each host goes
through its steps (pending, drained, upgraded, done).

Time: the ``rollout:`` step takes one step (the plan and the first wave's
drain).  Each step after it (a boot, an event, a delete, a workload boot)
first advances the roll-out by one step, then runs; so the boots after a
``rollout:`` step land, or fail, while its waves are out.  When the steps
end before the roll-out does, extra steps run it to its end (or until
only servers that never go hold a host).

A wave:

1. the command's capacity guard
   (:func:`~gpu_nova_ext.operator.rollout_run.guard_problems`) on the view
   of now: hosts the roll-out has out and unhealthy GPUs count.  A wave
   that would take more than ``max_unavailable`` does not start and the
   roll-out stops there, as the command does;
2. each host of the wave is disabled as nova-compute does when its
   service is disabled: Nova's ``ComputeVirtAPI.update_compute_provider_
   status`` puts ``COMPUTE_STATUS_DISABLED`` on its compute node
   provider, which Nova's ``compute_status_filter`` forbids: no boot and
   no move lands there;
3. the servers on its GPUs move with remediation's code
   (:meth:`gpu_nova_ext.simulate.remediation.Controller.drain`: the
   ``migrate`` policy, live or cold migration through Nova's scheduler,
   ``max_concurrent`` and ``max_concurrent_per_host`` from the scenario's
   ``remediation:`` or the options' defaults).  A server that does not
   move (metadata ``gpu_nova_ext:remediation: never``, or no valid host)
   stays, and its host waits, drained, in the wave until the server is
   gone (deleted, or its lifetime over); the command stops there with the
   host drained, and the wait is what that costs;
4. ``upgrade_steps`` steps after its last server left, the host's GPUs run
   the new driver and its agent's next cycle reports it (the version in
   its state, the ``CUSTOM_GPU_DRIVER_<branch>`` trait); once the state
   says every GPU runs the target branch, healthy
   (:func:`~gpu_nova_ext.operator.rollout_run.agent_lags`), the host is
   enabled again;
5. the wave ends when its last host is back, and the next one starts in
   the same step.
"""
import collections
import dataclasses
import types

from oslo_log import log as logging

from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.operator import rollout_run
from gpu_nova_ext.simulate import nova_claims
from gpu_nova_ext.simulate import remediation
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import result as res
from gpu_nova_ext.simulate import steps as st

LOG = logging.getLogger(__name__)

PENDING = rollout_run.PENDING
DRAINED = rollout_run.DRAINED
UPGRADED = rollout_run.UPGRADED
DONE = rollout_run.DONE


class Rollout:
    """One ``rollout:`` step carried out on the simulation ``sim``.

    ``sim`` is the :class:`gpu_nova_ext.simulate.runner.Simulation`: its
    hosts, scheduling, clock, server registry and progress.
    """

    def __init__(self, spec: st.Rollout, sim):
        self.spec = spec
        self.sim = sim
        self.result = res.RolloutResult(driver=spec.driver,
                                        max_unavailable=spec.max_unavailable,
                                        started=sim.step_no)
        self.state: rollout_run.RunState | None = None
        self.current = 0                  # the wave running (its index)
        self.active = False
        #: host -> pool -> capacity, as the plan counted it
        self.capacity: dict[str, collections.Counter] = {}
        self.out: set[str] = set()        # hosts the roll-out disabled
        self.upgrading: dict[str, int] = {}   # host -> steps left
        self.waiting: dict[str, list[str]] = {}   # host -> why not back
        moves = dataclasses.replace(
            sim.scenario.remediation or remediation_spec.Spec(),
            policy='migrate', enabled=True)
        self.mover = remediation.Controller(moves, sim, label='roll-out')
        self.result.moves = self.mover.moves
        # nova-compute's report client and virt API, for the service
        # status trait (one for the hosts: each call reads afresh)
        self._compute = types.SimpleNamespace(
            reportclient=nova_claims.report_client(
                sim.placement.mount_endpoint(), mount=sim.placement.mount))

    # -- the plan ----------------------------------------------------------

    def view(self) -> audit.AuditReport:
        """``openstack gpu audit`` of the simulated cloud now."""
        client = next(iter(self.sim.hosts.values())).client
        states = {name: host.payload for name, host in self.sim.hosts.items()
                  if host.agent_up and host.payload}
        return audit.build_report(audit.collect(client), states)

    def start(self) -> None:
        """Plan the waves (``openstack gpu rollout plan``), start the first."""
        spec = self.spec
        report = self.view()
        hosts = None
        if spec.hosts:
            hosts = {h for h in self.sim.hosts
                     if h.startswith(tuple(spec.hosts))}
        plan = rollout.plan(report, spec.max_unavailable, hosts=hosts,
                            model=spec.model,
                            target_branch=rollout.branch(spec.driver))
        self.state = rollout_run.RunState.from_plan(plan, spec.driver,
                                                    spec.max_unavailable)
        r = self.result
        r.totals, r.allowed = dict(plan.totals), dict(plan.allowed)
        r.done, r.notes = list(plan.done), list(plan.notes)
        r.waves = [res.WaveResult(number=n, hosts=list(w.hosts),
                                  planned=dict(w.down),
                                  over_limit=list(w.over_limit))
                   for n, w in enumerate(self.state.waves, 1)]
        for g in report.gpus:
            if g.host in self.state.hosts:
                self.capacity.setdefault(g.host, collections.Counter())[
                    rollout.pool(g)] += g.total
        self.sim.progress('roll-out to driver %s: %d host(s) in %d '
                          'wave(s); at most %s out at once%s' % (
                              spec.driver, len(self.state.hosts),
                              len(r.waves), _pools(r.allowed, r.totals),
                              ''.join('; ' + n for n in r.notes)))
        self.active = True
        self._start_wave()

    # -- the steps -----------------------------------------------------------

    def tick(self) -> None:
        """One step: moves go on, upgrades progress, hosts come back."""
        if not self.active:
            return
        self.mover.tick()
        self._advance()

    def boot_failed(self, server: res.ServerResult) -> None:
        """A boot failed: count it against the wave out now."""
        if self.active and not server.quota:
            self.result.waves[self.current].failed_boots.append(
                server.server)

    def stuck(self, expiring: set[str]) -> bool:
        """Whether nothing left can move the running wave on.

        Called once the scenario's steps are over (no event changes a GPU
        or an agent any more): a host waits for servers that never go
        (``expiring``: the servers whose lifetime ends later), or for an
        agent that does not report the target driver on healthy GPUs.
        """
        if not self.active or self.upgrading or self.mover.pending:
            return False
        wave = self.state.waves[self.current]
        for host in wave.hosts:
            if self.state.hosts[host].step != PENDING:
                continue         # done, or its agent lags (see above)
            left = self._left(host)
            if left is None or not set(left) - expiring:
                return False
        return True

    def finish(self) -> None:
        """The run is over: say what the roll-out did not finish."""
        if not self.active:
            return
        self.active = False
        wave = self.result.waves[self.current]
        for host in self.state.waves[self.current].hosts:
            if self.state.hosts[host].step == DONE:
                continue
            why = '; '.join(self.waiting.get(host) or ['not upgraded'])
            wave.left[host] = 'left drained: %s' % why
        self.result.stopped = ('the run ended during wave %d: %s' % (
            wave.number, '; '.join('%s %s' % kv
                                   for kv in sorted(wave.left.items()))))
        self.sim.progress('roll-out: %s' % self.result.stopped)

    def _start_wave(self) -> None:
        waves = self.state.waves
        if self.current >= len(waves):
            self.active = False
            self.result.finished = self.sim.step_no
            self.sim.progress('roll-out done at step %d: %d host(s) run '
                              'driver %s' % (self.sim.step_no,
                                             len(self.result.upgraded),
                                             self.spec.driver))
            return
        wave, result = waves[self.current], self.result.waves[self.current]
        problems = rollout_run.guard_problems(self.view(), self.out, wave,
                                              self.state.allowed)
        if problems:
            self.active = False
            self.result.stopped = (
                'wave %d not started: it would take more capacity out than '
                'max_unavailable %g%% allows: %s' % (
                    result.number, self.spec.max_unavailable,
                    '; '.join(problems)))
            self.sim.progress('roll-out: %s' % self.result.stopped)
            return
        result.started = self.sim.step_no
        self.sim.progress('roll-out wave %d/%d: %s (%s)' % (
            result.number, len(waves), ', '.join(wave.hosts),
            rollout_run.describe_down(wave, self.state.totals,
                                      self.state.allowed)))
        for host in wave.hosts:
            self._set_enabled(host, False)
            self.out.add(host)
        for host in wave.hosts:
            self.mover.drain(host, 'roll-out to driver %s, wave %d' % (
                self.spec.driver, result.number))
        self._advance()

    def _advance(self) -> None:
        wave = self.state.waves[self.current]
        result = self.result.waves[self.current]
        for host in wave.hosts:
            progress = self.state.hosts[host]
            if progress.step == PENDING:
                self._drained(host, result)
            elif progress.step == DRAINED:
                self.upgrading[host] -= 1
                if self.upgrading[host] <= 0:
                    self._upgrade(host)
            if progress.step == UPGRADED:
                self._back(host)
        hosts = set(wave.hosts)
        result.moved = sorted({m.server for m in self.mover.moves
                               if m.outcome == 'moved' and m.host in hosts})
        self._measure(result)
        if all(self.state.hosts[h].step == DONE for h in wave.hosts):
            result.ended = self.sim.step_no
            self.current += 1
            self._start_wave()

    def _drained(self, host: str, wave: res.WaveResult) -> None:
        """Start the upgrade once no server is left on its GPUs."""
        left = self._left(host)
        if left is None:
            return                       # moves still to come
        if left:
            why = {m.server: m.why() for m in self.mover.moves
                   if m.host == host and m.outcome != 'moved'}
            for name in left:
                wave.staying[name] = why.get(name, 'still on %s' % host)
            self.waiting[host] = ['%s stays (%s)' % (n, wave.staying[n])
                                  for n in left]
            return
        self.state.hosts[host].step = DRAINED
        self.upgrading[host] = self.spec.upgrade_steps
        self.waiting[host] = ['upgrading']
        self.sim.progress('roll-out: %s drained; upgrading (%d steps)'
                          % (host, self.spec.upgrade_steps))

    def _left(self, host: str) -> list[str] | None:
        """Servers still on ``host``'s GPUs; None while moves are to come."""
        if self.mover.in_flight[host] or any(
                d.host == host for d in self.mover.pending):
            return None
        names = self.sim.server_names()
        found = gpu_consumers.consumers(self.sim.hosts[host].client, host)
        return sorted({names.get(c.consumer, c.consumer) for c in found})

    def _upgrade(self, host: str) -> None:
        """The host's GPUs run the new driver; its agent cycles."""
        del self.upgrading[host]
        sim_host = self.sim.hosts[host]
        for address in sim_host.providers_of_gpu:
            facts = sim_host.facts.get(address)
            if facts is not None:
                facts['driver_version'] = self.spec.driver
        sim_host.cycle(self.sim.clock.wall())
        if sim_host.agent_up:
            self.sim.cast(sim_host)
        self.state.hosts[host].step = UPGRADED
        self.sim.progress('roll-out: %s upgraded to driver %s'
                          % (host, self.spec.driver))

    def _back(self, host: str) -> None:
        """Enable ``host`` once its agent says it is ready."""
        sim_host = self.sim.hosts[host]
        lags = rollout_run.agent_lags(
            sim_host.payload if sim_host.agent_up else None, host,
            self.state.target)
        if lags:
            self.waiting[host] = lags
            return
        self._set_enabled(host, True)
        self.out.discard(host)
        self.waiting.pop(host, None)
        self.state.hosts[host].step = DONE
        self.result.upgraded.append(host)
        self.sim.progress('roll-out: %s back: every GPU runs driver branch '
                          '%s and is healthy' % (host, self.state.target))

    def _set_enabled(self, host: str, enabled: bool) -> None:
        """nova-compute's service status, as its compute manager sets it.

        ``ComputeVirtAPI.update_compute_provider_status``: the
        ``COMPUTE_STATUS_DISABLED`` trait on the compute node provider,
        read afresh (the agent writes traits there too).
        """
        from nova.compute import manager
        sim_host = self.sim.hosts[host]
        client = self._compute.reportclient
        client.clear_provider_cache(init=True)
        client.get_provider_tree_and_ensure_root(
            self.sim.sched.ctx, sim_host.root_uuid, name=sim_host.nodename)
        manager.ComputeVirtAPI(self._compute).update_compute_provider_status(
            self.sim.sched.ctx, sim_host.root_uuid, enabled)
        self.sim.sched.changed(host)
        LOG.debug('roll-out: nova-compute on %(host)s %(status)s',
                  {'host': host,
                   'status': 'enabled' if enabled else 'disabled'})

    def _measure(self, wave: res.WaveResult) -> None:
        """Capacity out of service now, into the wave's and the run's peak."""
        out: collections.Counter = collections.Counter()
        for host in self.out:
            out.update(self.capacity.get(host, {}))
        for peak in (wave.peak_out, self.result.peak_out):
            for pool, n in out.items():
                peak[pool] = max(peak.get(pool, 0), n)


def _pools(counts: dict[str, int], totals: dict[str, int]) -> str:
    """``A100_80GB_PCIE vgpu 16 of 64``, per pool."""
    return ', '.join('%s %d of %d' % (p, n, totals.get(p, 0))
                     for p, n in sorted(counts.items())) or 'nothing'
