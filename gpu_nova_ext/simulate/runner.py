# SPDX-License-Identifier: Apache-2.0

"""Play a scenario against real parts and collect where servers landed.

Phases (each reported through the ``progress`` callback):

1. **placement**: the real openstack-placement application
   (:class:`gpu_nova_ext.simulate.embedded.EmbeddedPlacement`), called in
   process through a requests transport adapter: every client (the
   agents', Nova's report client) sends real HTTP requests, minus the
   socket.
2. **nova**: the scenario's ``nova_conf:`` on Nova's CONF, flavors checked
   by nova-api's validators, the scheduler's GPU state cache on the
   simulated clock.
3. **hosts**: per host, the providers nova-compute would create
   (:mod:`gpu_nova_ext.simulate.compute_providers`), then one real agent cycle
   (:mod:`gpu_nova_ext.simulate.host`) whose state messages (protocol 1.1,
   from the agent's own publisher) go into the state cache through its
   ingestion path (``cache.update``), as the state channel's endpoint
   hands them over.
4. **steps**: boots (:mod:`gpu_nova_ext.simulate.scheduling`), events,
   deletes, then the ``workload:`` generator.  Each step takes
   ``step_seconds`` on the simulated clock (:class:`SimClock`); agents
   re-cast every ``[agent] report_interval`` simulated seconds, so state
   ages out (``[gpu_scheduler] state_ttl``) only where the scenario stops
   an agent (``agent: down``), never because the machine running the
   simulation is slow.  The agents' health judges run on the same clock
   (:mod:`gpu_nova_ext.simulate.agent_health`); with ``remediation:``,
   a GPU turning unhealthy moves its servers
   (:mod:`gpu_nova_ext.simulate.remediation`); a ``rollout:`` step
   upgrades hosts in waves while the steps after it run
   (:mod:`gpu_nova_ext.simulate.rollout`).
5. **occupancy**: per GPU provider, usage and capacity read back from
   Placement's database in one query, health from the state cache.
"""
from collections.abc import Callable
import shutil
import tempfile
import time
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.simulate import agent_health
from gpu_nova_ext.simulate import clock
from gpu_nova_ext.simulate import conf_keys
from gpu_nova_ext.simulate import host as sim_host
from gpu_nova_ext.simulate import identity
from gpu_nova_ext.simulate import metrics
from gpu_nova_ext.simulate import misplaced
from gpu_nova_ext.simulate import nova_claims
from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import nova_filter_handlers
from gpu_nova_ext.simulate import nova_flavors
from gpu_nova_ext.simulate import quotas as sim_quotas
from gpu_nova_ext.simulate import remediation
from gpu_nova_ext.simulate import reservations as sim_reservations
from gpu_nova_ext.simulate import result as res
from gpu_nova_ext.simulate import rollout as sim_rollout
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import scheduling
from gpu_nova_ext.simulate import steps as st
from gpu_nova_ext.simulate import workload as wl

LOG = logging.getLogger(__name__)

Progress = Callable[[str], None]
#: Above this many hosts, per-host progress lines give way to a bar.
HOST_LINES_MAX = 50


SimClock = clock.SimClock


class Simulation:
    """Runs one scenario; :meth:`run` returns a :class:`res.Result`.

    Set-up, boots and deletes, and the events, health verdicts and
    remediation's moves of a run (remediation's Controller calls
    :meth:`server_names` and :meth:`relocated`): one class, one module.

    :param bar: ``bar(total, desc)`` returns a progress bar object with
        ``update(n)`` and ``close()`` (tqdm), or None for none.
    """

    def __init__(self, scenario: scn.Scenario,
                 progress: Progress | None = None,
                 bar: Callable[..., Any] | None = None,
                 name: str | None = None,
                 after_steps: Callable[['Simulation'], None] | None = None):
        self.scenario = scenario
        #: called when the steps are played, while Placement still runs
        #: (``openstack gpu explain`` asks one more request there)
        self.after_steps = after_steps
        self.progress = progress or (lambda line: None)
        self.bar = bar
        self.name = name
        self.hosts: dict[str, sim_host.SimulatedHost] = {}
        self.clock = SimClock()
        self.step_no = 0
        self._counters: dict[str, int] = {}
        self._servers: dict[str, tuple[str, str]] = {}   # name -> host, uuid
        self.servers = self._servers
        self.metadata: dict[str, dict[str, str]] = {}    # name -> metadata
        self.projects: dict[str, str] = {}               # name -> project
        self.remediation = None
        self.rollout: sim_rollout.Rollout | None = None
        self.sched: scheduling.Scheduling | None = None
        self._judging: set[str] = set()   # hosts whose judge may change
        self._expiry: dict[int, list[str]] = {}          # step -> servers

    def _live_servers(self, project_id: str) -> int:
        """The project's servers now (Nova counts instance mappings)."""
        return sum(1 for name in self._servers
                   if self.projects.get(name, identity.PROJECT_ID)
                   == project_id)

    def run(self) -> res.Result:
        start = time.monotonic()
        result = res.Result(scenario=self.scenario, policy=self.name)
        workdir = tempfile.mkdtemp(prefix='gpu-nova-ext-simulate-')
        novaconf = nova_config.NovaConfig(
            self.scenario, sim_reservations.extra_filters(self.scenario))
        placement = None
        cache = None
        try:
            novaconf.apply()
            nova_flavors.check_flavors(self.scenario)
            scheduler = nova_filter_handlers.load_scheduler(self.scenario,
                                                            novaconf.conf)
            from gpu_nova_ext.simulate import embedded
            # an in-memory database: one connection, no file I/O
            placement = embedded.EmbeddedPlacement(
                thread_yield=False, options=self.scenario.placement_conf)
            endpoint = placement.mount_endpoint()
            self.placement = placement
            self.progress('placement: openstack-placement in process '
                          '(%s); %s' % (endpoint, self._settings(novaconf)))
            cache = self._cache = self._make_cache(novaconf.conf)
            self.checker = misplaced.Checker()
            self.progress('nova: %d filters, %d weighers; state cache on '
                          'the simulated clock (state_ttl %.0f s)' % (
                              len(scheduler.filters),
                              len(scheduler.weighers), cache.ttl))
            t0, c0 = time.monotonic(), time.process_time()
            self._start_hosts(workdir, endpoint, cache)
            result.timings['setup'] = time.monotonic() - t0
            result.cpu['setup'] = time.process_time() - c0
            self.meter = metrics.Meter(self.scenario, self.hosts)
            self.sched = scheduling.Scheduling(
                self.scenario, scheduler, self.hosts, cache,
                nova_claims.report_client(endpoint, mount=placement.mount))
            if self.scenario.quotas:
                quotas = sim_quotas.Quotas(
                    self.scenario, novaconf, self.sched.client,
                    self.sched.ctx, self._live_servers)
                quotas.start()
                self.sched.quotas = quotas
            if self.scenario.remediation is not None:
                self.remediation = remediation.Controller(
                    self.scenario.remediation, self)
                result.moves = self.remediation.moves
            t0, c0 = time.monotonic(), time.process_time()
            self._play(result, cache)
            result.timings['steps'] = time.monotonic() - t0
            if self.sched.quotas is not None:
                result.quotas = self.sched.quotas.summary()
            result.cpu['steps'] = time.process_time() - c0
            t0, c0 = time.monotonic(), time.process_time()
            result.occupancy = self._occupancy(cache)
            result.summary = self.meter.summary(result)
            warning = misplaced.warning(None, result.servers)
            if warning:
                self.progress(warning)
            result.timings['occupancy'] = time.monotonic() - t0
            result.cpu['occupancy'] = time.process_time() - c0
        finally:
            if self.sched and self.sched.quotas is not None:
                self.sched.quotas.stop()
            if cache is not None:
                from gpu_nova_ext.state import cache as state_cache
                state_cache.reset_cache()
            if placement is not None:
                placement.close()
            novaconf.restore()
            shutil.rmtree(workdir, ignore_errors=True)
        result.elapsed = time.monotonic() - start
        result.sim_seconds = self.clock.now
        self.progress('done: %d servers, %d events in %.1f s (%s; %.0f '
                      'simulated s)' % (
                          len(result.servers), len(result.events),
                          result.elapsed, ', '.join(
                              '%s %.1f s' % kv
                              for kv in result.timings.items()),
                          self.clock.now))
        return result

    # -- set-up ------------------------------------------------------------

    def _settings(self, novaconf) -> str:
        """The candidate settings in a line: stock or recommended."""
        conf = self.placement.conf
        return ('%s settings: [placement] max_allocation_candidates %d, '
                'allocation_candidates_generation_strategy %s, '
                '[workarounds] optimize_for_wide_provider_trees %s; nova '
                '[scheduler] max_placement_results %d' % (
                    'recommended' if self.scenario.recommended else 'stock',
                    conf.placement.max_allocation_candidates,
                    conf.placement.allocation_candidates_generation_strategy,
                    conf.workarounds.optimize_for_wide_provider_trees,
                    novaconf.conf.scheduler.max_placement_results))

    def _make_cache(self, conf):
        """The scheduler's state cache, on the simulated clock.

        Nothing listens: payloads are handed to ``update()`` as the state
        channel's endpoint does.
        """
        from gpu_nova_ext.state import cache as state_cache
        state_cache.reset_cache()
        cache = state_cache.get_cache()
        cache.configure(conf)
        cache.clock = self.clock.monotonic
        return cache

    def _start_hosts(self, workdir: str, endpoint: str, cache) -> None:
        specs = self.scenario.hosts
        lines = len(specs) <= HOST_LINES_MAX
        bar = None if lines or self.bar is None else self.bar(
            len(specs), 'hosts')
        from gpu_nova_ext.simulate import compute_providers
        writer = compute_providers.ObjectWriter(self.placement.conf)
        try:
            for spec in specs:
                host = sim_host.SimulatedHost(spec, workdir, endpoint)
                self.hosts[spec.name] = host
                host.write_files()
                host.start_agent(self.placement.mount)
                conf_keys.apply_agent_conf(host.conf,
                                           self.scenario.agent_conf)
                host.health = agent_health.HostHealth(host,
                                                      self.clock.monotonic)
                host.health.sample(self.clock.now)
                if host.health.active():
                    self._judging.add(host.name)
                host.create_providers(writer)
                sim_reservations.apply(self.scenario, host)
                report, payload = host.cycle(self.clock.wall())
                self._cast(cache, host)
                if lines:
                    self.progress(
                        'host %s: %d GPUs (nova %s), %d GPU providers; '
                        'agent cycle: %d Placement writes, state cast' % (
                            spec.name, len(payload['gpus']),
                            spec.nova_gpu_mode, len(host.gpu_of_provider),
                            report.writes))
                elif bar is not None:
                    bar.update(1)
        finally:
            if bar is not None:
                bar.close()
        self._classes_nobody_offers(writer)
        if not lines:
            self.progress('hosts: %d set up, %d GPUs' % (
                len(self.hosts), sum(len(h.payload['gpus'])
                                     for h in self.hosts.values())))

    def _classes_nobody_offers(self, writer) -> None:
        """Say which flavors ask a custom class no host offers.

        Their boots cannot land (e.g. a MIG size the layout of this run
        lacks).  The class is created, as an operator creates it in a
        cloud where no host offers it yet, so that Placement answers "no
        candidates" instead of refusing the query.
        """
        offered = self.placement.custom_classes_offered()
        for flavor in self.scenario.flavors.values():
            for key, value in flavor.extra_specs.items():
                prefix, _, rc = key.partition(':')
                if not (prefix.startswith('resources') and
                        rc.startswith('CUSTOM_')) or rc in offered:
                    continue
                writer.resource_class(rc)
                self.progress('flavor %s asks %s=%s, which no host of this '
                              'run offers: its boots find no host' % (
                                  flavor.name, rc, value))

    def _cast(self, cache, host: sim_host.SimulatedHost) -> None:
        """Hand the host's state messages to the state cache.

        What the real agent casts (protocol 1.1: facts when they changed,
        metrics every time, from its :class:`Publisher`), through the RPC
        endpoint's path; a rejected message stops the run (a bug).
        """
        for message in host.publisher.messages(host.payload):
            if not cache.update(message):
                raise RuntimeError(
                    'the state cache rejected the GPU state (%s message) '
                    'of %s (see the warning above)'
                    % (message.get('kind'), host.name))
        host.last_cast = self.clock.now

    def cast(self, host: sim_host.SimulatedHost) -> None:
        """Hand the host's state to the scheduler's cache (after a cycle)."""
        self._cast(self._cache, host)

    # -- steps -------------------------------------------------------------

    def _tick(self, result: res.Result, cache) -> None:
        """One step of simulated time: lifetimes end, agents re-cast."""
        self.step_no += 1
        self.clock.advance(self.scenario.step_seconds)
        for server in self._expiry.pop(self.step_no, []):
            if server in self._servers:
                self._delete(result, cache, server, expired=True)
        if self.remediation is not None:
            self.remediation.tick()
        if self.rollout is not None:
            self.rollout.tick()
        now = self.clock.now
        for name in sorted(self._judging):
            host = self.hosts[name]
            if host.agent_up and host.health.due(now):
                self._judge(result, cache, host)
        interval = self._report_interval
        for host in self.hosts.values():
            if host.agent_up and now - host.last_cast >= interval:
                # nothing changed on the host since its last cycle: the
                # same facts and metrics, a new timestamp
                host.payload = dict(host.payload,
                                    generated_at=self.clock.wall())
                self._cast(cache, host)

    def _play(self, result: res.Result, cache) -> None:
        any_host = next(iter(self.hosts.values()))
        self._report_interval = any_host.conf.agent.report_interval
        for step in self.scenario.steps:
            self._index = step.index
            if isinstance(step, st.Boot):
                for _ in range(step.count):
                    self._tick(result, cache)
                    server = self._boot(result, cache, step.flavor,
                                        step.name, step.lifetime, step.index,
                                        step.project, step.host,
                                        step.gpus)
                    if step.metadata and not server.error:
                        self.metadata[server.server] = dict(step.metadata)
                    if step.project and not server.error:
                        self.projects[server.server] = step.project
                continue
            self._tick(result, cache)
            if isinstance(step, st.Delete):
                self._delete_matching(result, cache, step)
            elif isinstance(step, st.Rollout):
                self.rollout = sim_rollout.Rollout(step, self)
                result.rollout = self.rollout.result
                self.rollout.start()
            else:
                self._event(result, cache, step)
        self._index = len(self.scenario.steps)
        if self.scenario.workload is not None:
            self._workload(result, cache, self.scenario.workload)
        while self.remediation is not None and self.remediation.pending:
            self._tick(result, cache)     # moves still waiting: more steps
        # a roll-out still running: more steps, while anything can change
        while self.rollout is not None and self.rollout.active and (
                not self.rollout.stuck({s for names in self._expiry.values()
                                        for s in names})):
            self._tick(result, cache)
        if self.rollout is not None:
            self.rollout.finish()
        if self.after_steps is not None:
            self.after_steps(self)

    def _workload(self, result: res.Result, cache, work: st.Workload):
        gen = wl.Generator(work, self.meter)
        bar = self.bar(None, 'servers') if self.bar else None
        try:
            for flavor, lifetime in gen:
                self._tick(result, cache)
                server = self._boot(result, cache, flavor, None, lifetime,
                                    None)
                if bar is not None:
                    bar.update(1)
                if gen.done(server):
                    break
        finally:
            if bar is not None:
                bar.close()
        self.progress('workload: %d servers arrived (%.1f%% of the GPU '
                      'capacity requested); stopped: %s' % (
                          gen.arrived, self.meter.arrived_pct, gen.reason))
        result.stop_reason = gen.reason

    def _name(self, prefix: str) -> str:
        self._counters[prefix] = self._counters.get(prefix, 0) + 1
        return '%s-%d' % (prefix, self._counters[prefix])

    def _boot(self, result: res.Result, cache, flavor_name: str,
              prefix: str | None, lifetime: int | None,
              index: int | None, project: str | None = None,
              host: str | None = None,
              gpus: list[str] | None = None) -> res.ServerResult:
        flavor = self.scenario.flavors[flavor_name]
        server = res.ServerResult(server=self._name(prefix or flavor.name),
                                  flavor=flavor.name, project=project,
                                  step=len(self.scenario.steps)
                                  if index is None else index)
        server.arrived_pct = self.meter.arrive(flavor)
        host, instance_uuid = self.sched.boot(server, flavor, host, gpus)
        for name in self.sched.missing_state:
            result.missing_state.setdefault(name, self.step_no)
        result.servers.append(server)
        if server.error:
            if not server.quota:         # demand the scheduler never saw
                self.meter.failed(server, flavor)
            if self.rollout is not None:
                self.rollout.boot_failed(server)
            result.curve.append(self.meter.point())
            self.progress('boot %s (%s): %s' % (server.server, server.flavor,
                                                server.error))
            return server
        server.misplaced = self.checker.check(flavor, host.payload,
                                              server.gpus)
        if server.misplaced:
            self.meter.misplaced.add(instance_uuid)
        self.meter.consumed(host, instance_uuid, +1)
        result.curve.append(self.meter.point())
        host.cycle(self.clock.wall())
        if host.agent_up:
            self._cast(cache, host)
        self._servers[server.server] = (host.name, instance_uuid)
        if lifetime:
            self._expiry.setdefault(self.step_no + lifetime, []).append(
                server.server)
        self.progress('boot %s (%s): %s %s%s' % (
            server.server, server.flavor, server.host,
            ','.join(server.gpus) or '-',
            ' MISPLACED: %s' % server.misplaced if server.misplaced
            else ''))
        return server

    def _delete_matching(self, result, cache, step: st.Delete) -> None:
        names = ([step.target] if step.target in self._servers else
                 [n for n in self._servers if n.startswith(step.target)])
        for name in names:
            self._delete(result, cache, name)
        result.events.append(res.EventResult(
            host='-', gpu=None, health=None, metrics={}, step=step.index,
            what='delete %s: %d server(s)' % (step.target, len(names))))
        self.progress('delete %s: %d server(s)' % (step.target, len(names)))

    def _delete(self, result, cache, name: str, expired=False) -> None:
        """Delete a server.

        Its Placement allocations and the host's usage go; the host's
        agent re-casts.
        """
        host_name, instance_uuid = self._servers.pop(name)
        self.metadata.pop(name, None)
        self.projects.pop(name, None)
        host = self.hosts[host_name]
        self.meter.consumed(host, instance_uuid, -1)
        self.meter.misplaced.discard(instance_uuid)
        self.sched.delete(instance_uuid, host_name)
        host.release(instance_uuid)
        host.cycle(self.clock.wall())
        if host.agent_up:
            self._cast(cache, host)
        result.deleted += 1

    # -- events, health and remediation's moves -----------------------

    def _event(self, result, cache, step: st.Event) -> None:
        host = self.hosts[step.host]
        if step.agent is not None:
            host.agent_up = step.agent == 'up'
            if host.agent_up:
                # a restarted agent: its message sequence starts afresh
                host.publisher = agent_payload.Publisher()
                host.cycle(self.clock.wall())
                self._cast(cache, host)
            what = 'agent %s' % step.agent
        else:
            old = self._health_of(host, step.gpu)
            host.apply_event(step)
            verdicts = []
            if step.xids:
                host.health.xid(step.gpu, step.xids)
            if step.metrics or step.xids:
                host.health.dirty = True
                self._judging.add(host.name)
                if host.agent_up:
                    verdicts = host.health.sample(self.clock.now)
            host.cycle(self.clock.wall())
            if host.agent_up:
                self._cast(cache, host)
            what = ', '.join(
                (['health -> %s' % step.health] if step.health else []) +
                ['%s -> %s' % kv for kv in step.metrics.items()] +
                ['XID %d' % x for x in step.xids])
        result.events.append(res.EventResult(
            host=step.host, gpu=step.gpu, health=step.health,
            metrics=dict(step.metrics), step=step.index, what=what))
        self.progress('event: %s %s%s' % (
            step.host, step.gpu + ' ' if step.gpu else '', what))
        if step.agent is None and host.agent_up:
            if step.health and step.health != old[0]:
                self._health_changed(host, step.gpu, old, (
                    step.health, step.reasons))
            self._verdicts(result, host, verdicts)

    @staticmethod
    def _health_of(host, gpu: str) -> tuple[str, list[str]]:
        """What the host's agent last reported for ``gpu``."""
        for entry in (host.payload or {}).get('gpus', []):
            if entry.get('pci_address') == gpu:
                health = entry.get('health') or {}
                return (health.get('state', 'healthy'),
                        list(health.get('reasons') or []))
        return 'healthy', []

    def _judge(self, result, cache, host) -> None:
        """A sample of the host's GPUs; changed verdicts are cast at once."""
        verdicts = host.health.sample(self.clock.now)
        if not host.health.active():
            self._judging.discard(host.name)
        if verdicts:
            host.cycle(self.clock.wall())
            self._cast(cache, host)
            self._verdicts(result, host, verdicts)

    def _verdicts(self, result, host, verdicts) -> None:
        for v in verdicts:
            what = 'health -> %s (agent: %s)' % (
                v.state, '; '.join(v.reasons) or 'no cause left')
            result.events.append(res.EventResult(
                host=host.name, gpu=v.key, health=v.state, metrics={},
                step=self._index, what=what))
            self.progress('agent %s: GPU %s %s' % (host.name, v.key, what))
            self._health_changed(host, v.key, (v.old_state, v.old_reasons),
                                 (v.state, v.reasons))

    def _health_changed(self, host, gpu: str, old, new) -> None:
        """The agent's ``gpu.health.update``, to remediation if on."""
        if self.remediation is not None:
            self.remediation.health_changed(remediation.health_payload(
                host.name, gpu, host.facts.get(gpu, {}), old[0], new[0],
                old[1], new[1]))

    def server_names(self) -> dict[str, str]:
        """Instance UUID -> server name of the servers that exist."""
        return {uuid: name for name, (_, uuid) in self._servers.items()}

    def relocated(self, name: str, instance_uuid: str, src, dest,
                  allocations: dict) -> list[str]:
        """A server moved: both hosts as nova-compute leaves them.

        Returns the server's GPUs on ``dest``.
        """
        flavor = src.instances[instance_uuid].flavor
        self.meter.consumed(src, instance_uuid, -1)
        src.release(instance_uuid)
        gpus = dest.consume(flavor, allocations, instance_uuid)
        self.meter.consumed(dest, instance_uuid, +1)
        self._servers[name] = (dest.name, instance_uuid)
        for host in (src, dest):
            host.cycle(self.clock.wall())
            if host.agent_up:
                self._cast(self._cache, host)
        return gpus

    # -- results -----------------------------------------------------------

    def _occupancy(self, cache) -> list[res.Occupancy]:
        usage = self.placement.provider_usage()
        rows = []
        for host in self.hosts.values():
            payload = cache.get(host.name)
            state = 'live' if payload is not None else 'missing'
            payload = payload or host.payload or {}
            by_address = {g['pci_address']: g
                          for g in payload.get('gpus', [])}
            for address in sorted(by_address):
                gpu = by_address[address]
                used = total = 0
                by_class: dict[str, tuple[int, int]] = {}
                for rp in host.providers_of_gpu.get(address, []):
                    # the class nova-compute created it with (the query
                    # gives class ids)
                    created = host.providers.get(rp)
                    for rc_id, (rp_total, rp_used) in usage.get(
                            rp, {}).items():
                        total += rp_total
                        used += rp_used
                        rc = created[1] if created else str(rc_id)
                        u, t = by_class.get(rc, (0, 0))
                        by_class[rc] = (u + rp_used, t + rp_total)
                layout = host.spec.mig_layouts.get(gpu.get('model') or '')
                rows.append(res.Occupancy(
                    host=host.name, gpu=address, model=gpu.get('model'),
                    used=used, total=total,
                    health=(gpu.get('health') or {}).get('state'),
                    mode=gpu.get('mode'), state=state, mig_layout=layout,
                    by_class=by_class if (layout or len(by_class) > 1)
                    else {}, power_profile=gpu.get('power_profile')))
        return rows


def run(path: str | None = None, progress: Progress | None = None
        ) -> res.Result:
    """Load the scenario at ``path`` (the shipped one when None), run it."""
    return Simulation(scn.load(path), progress).run()
