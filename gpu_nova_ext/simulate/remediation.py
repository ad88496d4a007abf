# SPDX-License-Identifier: Apache-2.0

"""Remediation in the simulator: servers move off a GPU turning unhealthy.

The flow of ``gpu-nova-ext remediate`` (:mod:`gpu_nova_ext.operator`), on
the simulated cloud:

1. a GPU turns unhealthy (an event's ``health: unhealthy``, or the agent's
   health judge deciding it from the GPU's metrics): the agent's
   ``gpu.health.update`` payload is built
   (:func:`gpu_nova_ext.agent.notifications.build_payload`) and turned into
   a trigger by the daemon's own :func:`remediate_daemon.trigger_from_health`;
2. the servers are the consumers of the GPU's providers' allocations in
   Placement (:func:`gpu_nova_ext.operator.gpu_consumers.consumers`);
3. :func:`remediation_policy.decide` decides per server (opt-out metadata
   ``gpu_nova_ext:remediation: never``, ``notify`` policy, live or cold
   migration), and :func:`remediation_policy.next_batch` picks the moves
   that may start under ``max_concurrent`` and ``max_concurrent_per_host``;
4. a move goes through Nova's scheduling path as a boot does (request spec
   with the source host ignored, Placement query, filters, weighers, claim;
   :meth:`gpu_nova_ext.simulate.scheduling.Scheduling.move`), and both
   hosts' agents cycle and re-cast.

A move takes one step of simulated time: the moves started during a step
are in flight until the next one, so the limits spread a GPU's servers
over steps.  Moves still waiting when the scenario's steps end run in extra
steps.  Unlike the command, the simulator acts by default (``enabled:
false`` shows what would be done); its nova-compute services never go
down, so ``evacuate`` moves as ``migrate`` does.

A roll-out's drain (:mod:`gpu_nova_ext.simulate.rollout`) uses a
Controller of its own: :meth:`Controller.drain` plans every server on the
host's GPUs with the ``migrate`` policy, as ``openstack gpu host drain
--migrate`` (:func:`gpu_nova_ext.operator.drain.drain`) does.
"""
import collections

from oslo_log import log as logging

from gpu_nova_ext.agent import notifications
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import remediate_daemon
from gpu_nova_ext.operator import remediation_policy as policy
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import result as res

LOG = logging.getLogger(__name__)


def health_payload(host: str, gpu: str, facts: dict, old: str,
                   new: str, old_reasons, reasons) -> dict:
    """The agent's ``gpu.health.update`` payload for a GPU's change."""
    return notifications.build_payload(
        host, gpu, facts.get('uuid'), facts.get('name'), old, new,
        list(old_reasons), list(reasons))


class Controller:
    """Plans and carries out the moves of one run.

    ``sim`` is the :class:`gpu_nova_ext.simulate.runner.Simulation`: its
    hosts, scheduling, meter, clock and server registry.
    """

    def __init__(self, spec: remediation_spec.Spec, sim,
                 label: str = 'remediation'):
        self.spec = spec
        self.sim = sim
        self.label = label          # what its progress lines start with
        self.pending: list[policy.Decision] = []
        self.in_flight: collections.Counter = collections.Counter()
        self.moves: list[res.MoveResult] = []

    # -- triggers ----------------------------------------------------------

    def health_changed(self, payload: dict) -> None:
        """A ``gpu.health.update``: plan for its GPU if it turned unhealthy."""
        trigger = remediate_daemon.trigger_from_health(payload)
        if trigger is None:
            return
        decisions = self._plan(trigger, self.spec.policy)
        if not decisions:
            self.sim.progress('remediation: no server on %s GPU %s (%s)' % (
                trigger.host, trigger.gpu, trigger.reason))
        self._queue(decisions)

    def drain(self, host: str, reason: str) -> list[policy.Decision]:
        """Plan the moves of every server on ``host``'s GPUs and start them.

        As ``openstack gpu host drain --migrate``: the ``migrate`` policy
        whatever ``[remediation] policy`` says.  Returns the decisions.
        """
        trigger = policy.Trigger(host=host, reason='drain: ' + reason,
                                 source='drain')
        decisions = self._plan(trigger, 'migrate')
        self._queue(decisions)
        return decisions

    def _plan(self, trigger: policy.Trigger,
              policy_name: str) -> list[policy.Decision]:
        """The policy's decision for each server of the trigger's GPUs."""
        host = self.sim.hosts[trigger.host]
        found = gpu_consumers.consumers(host.client, trigger.host,
                                        trigger.gpu)
        by_uuid = self.sim.server_names()
        facts = []
        for c in found:
            name = by_uuid.get(c.consumer)
            facts.append(policy.ServerFacts(
                id=c.consumer, host=c.host, gpu=c.gpu, kind=c.kind,
                exists=name is not None, name=name,
                status='ACTIVE' if name else None,
                metadata=self.sim.metadata.get(name, {})))
        # the policy orders by server id; the simulator's ids are random,
        # so its servers go by name, for runs that repeat
        return sorted(policy.decide(
            trigger, facts, policy_name, compute_up=True,
            passthrough_live=self.spec.passthrough_live_migration),
            key=lambda d: (d.name or '', d.server))

    def _queue(self, decisions: list[policy.Decision]) -> None:
        """Queue the moves (record the rest), start what the limits allow."""
        busy = {d.server for d in self.pending}
        for d in decisions:
            if d.moves and self.spec.enabled:
                if d.server in busy:
                    self._record(d, 'skipped', error='already being moved')
                    continue
                self.pending.append(d)
                continue
            self._record(d, 'would-%s' % d.action if d.moves else
                         'notified' if d.action == policy.NOTIFY
                         else 'skipped')
        self.start()

    # -- moves -------------------------------------------------------------

    def tick(self) -> None:
        """A new step: the moves of the last one are done; start more."""
        self.in_flight.clear()
        self.start()

    def start(self) -> None:
        batch = policy.next_batch(self.pending, self.in_flight,
                                  self.spec.max_concurrent,
                                  self.spec.max_concurrent_per_host)
        for d in batch:
            self.pending.remove(d)
            self.in_flight[d.host] += 1
            self._move(d)

    def _move(self, d: policy.Decision) -> None:
        sim = self.sim
        name = sim.server_names().get(d.server)
        if name is None:
            self._record(d, 'failed', error='the server was deleted '
                         'before its move started')
            return
        host_name, instance_uuid = sim.servers[name]
        if host_name != d.host:
            self._record(d, 'skipped', error='it runs on %s already'
                         % host_name)
            return
        src = sim.hosts[host_name]
        instance = src.instances[instance_uuid]
        from_gpus = sorted({src.gpu_of_provider[rp]
                            for rp in instance.allocations
                            if rp in src.gpu_of_provider})
        dest, allocations, error = sim.sched.move(
            instance_uuid, instance.flavor, src,
            cold=d.action == policy.COLD, project=sim.projects.get(name))
        if error:
            self._record(d, 'failed', error=error, from_gpus=from_gpus)
            return
        gpus = sim.relocated(name, instance_uuid, src, dest, allocations)
        self._record(d, 'moved', from_gpus=from_gpus, to_host=dest.name,
                     to_gpus=gpus)

    def _record(self, d: policy.Decision, outcome: str,
                error: str | None = None, from_gpus=None,
                to_host: str | None = None, to_gpus=None) -> None:
        move = res.MoveResult(
            server=d.name or d.server, host=d.host,
            gpus=list(from_gpus or ([d.gpu] if d.gpu else [])),
            action=d.action, outcome=outcome, reason=d.reason,
            to_host=to_host, to_gpus=list(to_gpus or []), error=error,
            step=self.sim.step_no)
        self.moves.append(move)
        LOG.info('remediation %(server)s: %(line)s',
                 {'server': move.server, 'line': move.line()})
        self.sim.progress('%s: %s %s' % (self.label, move.server,
                                         move.line()))
