# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
        return out
