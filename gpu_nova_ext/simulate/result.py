# SPDX-License-Identifier: Apache-2.0

"""What a simulation run gives: servers, events, occupancy, summary."""
import dataclasses
from typing import Any

from gpu_nova_ext.simulate import scenario as scn


@dataclasses.dataclass
class ServerResult:
    server: str
    flavor: str
    host: str | None = None
    gpus: list[str] = dataclasses.field(default_factory=list)
    weights: dict[str, float] = dataclasses.field(default_factory=dict)
    error: str | None = None
    weight: float | None = None      # the host's total weight
    #: the next best host and its weights (what the winner beat)
    runner_up: str | None = None
    runner_up_weights: dict[str, float] = dataclasses.field(
        default_factory=dict)
    #: filter -> GPUs of the chosen host whose candidates it dropped
    excluded: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    step: int = 0                    # index in the scenario's boots:
    #: requested GPU units so far, in % of the cloud's GPU capacity
    arrived_pct: float = 0.0
    project: str | None = None       # the boot's project: (reservations)
    quota: bool = False              # refused by quota, never scheduled
    #: why its GPUs do not satisfy its flavor's gpu: request (misplaced.py)
    misplaced: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.error is not None:
            out = {'server': self.server, 'flavor': self.flavor,
                   'error': self.error}
            if self.quota:
                out['refused_by'] = 'quota'
            return out
        out = {'server': self.server, 'flavor': self.flavor,
               'host': self.host, 'gpus': list(self.gpus),
               'weights': dict(self.weights)}
        if self.project is not None:
            out['project'] = self.project
        if self.misplaced is not None:
            out['misplaced'] = self.misplaced
        return out


@dataclasses.dataclass
class EventResult:
    host: str
    gpu: str | None
    health: str | None
    metrics: dict[str, float]
    step: int = 0
    what: str = ''


@dataclasses.dataclass
class MoveResult:
    """What remediation did with one server of an unhealthy GPU."""

    server: str
    host: str                        # where it was
    gpus: list[str]
    action: str                      # live-migrate, cold-migrate, ...
    outcome: str                     # moved, failed, skipped, notified,
    #                                  would-<action>
    reason: str                      # the policy's reason for the action
    to_host: str | None = None
    to_gpus: list[str] = dataclasses.field(default_factory=list)
    error: str | None = None         # why it was not moved
    step: int = 0                    # steps played when it happened

    def why(self) -> str:
        return self.error or self.reason

    def line(self) -> str:
        src = '%s %s' % (self.host, ','.join(self.gpus) or '-')
        if self.outcome == 'moved':
            return '%s from %s to %s %s' % (
                self.action, src, self.to_host,
                ','.join(self.to_gpus) or '-')
        return '%s on %s: %s' % (self.outcome, src, self.why())

    def to_dict(self) -> dict[str, Any]:
        return {'server': self.server, 'step': self.step,
                'from_host': self.host, 'from_gpus': list(self.gpus),
                'action': self.action, 'outcome': self.outcome,
                'to_host': self.to_host, 'to_gpus': list(self.to_gpus),
                'reason': self.why()}


def pct(part: float, whole: float) -> float:
    """``part`` in percent of ``whole`` (0 of nothing)."""
    return 100.0 * part / whole if whole else 0.0


@dataclasses.dataclass(kw_only=True, slots=True)
class WaveResult:
    """One wave of a roll-out.

    Design doc: Remediation, drains and driver roll-outs.
    """

    number: int                      # 1, 2, ...
    hosts: list[str]
    #: capacity the plan takes out, by pool (``MODEL mode``)
    planned: dict[str, int]
    #: pools this wave takes past the limit (a host alone holds more)
    over_limit: list[str] = dataclasses.field(default_factory=list)
    started: int | None = None       # step it started at (None: never)
    ended: int | None = None         # step its last host came back at
    #: most capacity out of service at once while it ran, by pool
    peak_out: dict[str, int] = dataclasses.field(default_factory=dict)
    moved: list[str] = dataclasses.field(default_factory=list)
    #: server -> why it stayed on its host (the host waits for it)
    staying: dict[str, str] = dataclasses.field(default_factory=dict)
    #: boots that failed while the wave's hosts were out
    failed_boots: list[str] = dataclasses.field(default_factory=list)
    #: host -> why it is not back at the end of the run
    left: dict[str, str] = dataclasses.field(default_factory=dict)

    def to_dict(self, totals: dict[str, int]) -> dict[str, Any]:
        return {'wave': self.number, 'hosts': list(self.hosts),
                'started_step': self.started, 'ended_step': self.ended,
                'planned_out': dict(self.planned),
                'over_limit': list(self.over_limit),
                'peak_out': {p: {'capacity': n, 'of': totals.get(p, 0),
                                 'pct': round(pct(n, totals.get(p, 0)), 2)}
                             for p, n in sorted(self.peak_out.items())},
                'moved': list(self.moved), 'staying': dict(self.staying),
                'failed_boots': list(self.failed_boots),
                'left': dict(self.left)}


@dataclasses.dataclass(kw_only=True, slots=True)
class RolloutResult:
    """A ``rollout:`` step: its plan, its waves, and what they cost."""

    driver: str
    max_unavailable: float           # percent
    started: int = 0                 # the step it was planned at
    totals: dict[str, int] = dataclasses.field(default_factory=dict)
    allowed: dict[str, int] = dataclasses.field(default_factory=dict)
    waves: list[WaveResult] = dataclasses.field(default_factory=list)
    #: hosts on the target branch already (left out by the plan)
    done: list[str] = dataclasses.field(default_factory=list)
    notes: list[str] = dataclasses.field(default_factory=list)
    moves: list[MoveResult] = dataclasses.field(default_factory=list)
    #: most capacity out of service at once over the run, by pool
    peak_out: dict[str, int] = dataclasses.field(default_factory=dict)
    #: hosts that came back on the target driver
    upgraded: list[str] = dataclasses.field(default_factory=list)
    finished: int | None = None      # the step its last wave ended at
    stopped: str | None = None       # why it stopped before the end

    @property
    def failed_boots(self) -> int:
        return sum(len(w.failed_boots) for w in self.waves)

    def peak_pct(self) -> dict[str, float]:
        """Peak capacity out, in percent of each pool."""
        return {p: pct(n, self.totals.get(p, 0))
                for p, n in sorted(self.peak_out.items())}

    def to_dict(self) -> dict[str, Any]:
        return {'driver': self.driver,
                'max_unavailable_pct': self.max_unavailable,
                'started_step': self.started, 'finished_step': self.finished,
                'stopped': self.stopped, 'capacity': dict(self.totals),
                'allowed_out': dict(self.allowed),
                'peak_out_pct': {p: round(v, 2)
                                 for p, v in self.peak_pct().items()},
                'failed_boots': self.failed_boots,
                'upgraded': list(self.upgraded),
                'already_on_target': list(self.done),
                'notes': list(self.notes),
                'waves': [w.to_dict(self.totals) for w in self.waves],
                'moves': [m.to_dict() for m in self.moves]}


@dataclasses.dataclass
class Occupancy:
    host: str
    gpu: str
    model: str | None
    used: int
    total: int
    health: str | None
    mode: str | None = None
    #: the host's GPU state in the scheduler's cache: live or missing
    state: str = 'live'
    #: the GPU's MIG layout (its host kind's ``mig:``), e.g. 1g.10gb=7
    mig_layout: str | None = None
    #: resource class -> (used, total), of a GPU whose providers offer
    #: several classes (a MIG layout of several sizes) or a MIG layout
    by_class: dict[str, tuple[int, int]] = dataclasses.field(
        default_factory=dict)
    #: the power profile its agent reports (``power:``)
    power_profile: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {'host': self.host, 'gpu': self.gpu, 'model': self.model,
               'used': self.used, 'total': self.total,
               'health': self.health, 'state': self.state}
        if self.mig_layout is not None:
            out['mig_layout'] = self.mig_layout
        if self.by_class:
            out['by_class'] = {rc: {'used': u, 'total': t}
                               for rc, (u, t) in sorted(
                                   self.by_class.items())}
        if self.power_profile is not None:
            out['power_profile'] = self.power_profile
        return out


@dataclasses.dataclass
class Result:
    scenario: scn.Scenario
    policy: str | None = None
    servers: list[ServerResult] = dataclasses.field(default_factory=list)
    events: list[EventResult] = dataclasses.field(default_factory=list)
    occupancy: list[Occupancy] = dataclasses.field(default_factory=list)
    #: host -> first step at which Placement offered it for a boot while
    #: its GPU state was missing in the scheduler (GPU filters excluded it)
    missing_state: dict[str, int] = dataclasses.field(default_factory=dict)
    summary: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: (arrived %, GPU allocation rate %, the same without misplaced
    #: servers %) after each boot
    curve: list[tuple[float, float, float]] = dataclasses.field(
        default_factory=list)
    #: remediation's moves (None: the scenario has no ``remediation:``)
    moves: list[MoveResult] | None = None
    #: per limit of ``quotas:`` (None: the scenario has none)
    quotas: list[dict] | None = None
    #: the ``rollout:`` step's (None: the scenario has none, or it was
    #: never reached)
    rollout: RolloutResult | None = None
    #: wall-clock and CPU seconds per phase (set-up, steps, occupancy)
    timings: dict[str, float] = dataclasses.field(default_factory=dict)
    cpu: dict[str, float] = dataclasses.field(default_factory=dict)
    deleted: int = 0
    stop_reason: str | None = None
    elapsed: float = 0.0
    sim_seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``--format json``: strict JSON (the writer refuses NaN)."""
        out = {'placements': [s.to_dict() for s in self.servers],
               'occupancy': [o.to_dict() for o in self.occupancy],
               'missing_state': [{'host': h, 'since_step': s}
                                 for h, s in sorted(
                                     self.missing_state.items())],
               'summary': dict(self.summary)}
        if self.moves is not None:
            out['remediation'] = [m.to_dict() for m in self.moves]
        if self.policy is not None:
            out['policy'] = self.policy
        if self.scenario.mig_variant is not None:
            out['mig_variant'] = self.scenario.mig_variant
        layouts = {h.name: dict(h.mig_layouts) for h in self.scenario.hosts
                   if h.mig_layouts}
        if layouts:
            out['mig_layouts'] = layouts
        if self.scenario.reservations:
            from gpu_nova_ext.simulate import reservations
            out['reservations'] = reservations.summary(self)
        if self.quotas is not None:
            out['quotas'] = self.quotas
        if self.rollout is not None:
            out['rollout'] = self.rollout.to_dict()
        return out
