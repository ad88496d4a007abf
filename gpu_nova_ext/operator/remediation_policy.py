# SPDX-License-Identifier: Apache-2.0

"""What to do with each server of an unhealthy GPU or a drained host.

Pure functions of plain records: :func:`decide` turns the facts read from
Nova and Placement into one :class:`Decision` per server, :func:`next_batch`
picks the decisions that may start now under the concurrency limits, and
:func:`retry_delays` gives the backoff of a failed migration.  No I/O here:
the controller (:mod:`gpu_nova_ext.operator.remediate`) reads the facts and
carries the decisions out.
"""
import collections
from collections.abc import Iterable
import dataclasses

OPT_OUT_KEY = 'gpu_nova_ext:remediation'
OPT_OUT_VALUE = 'never'

LIVE = 'live-migrate'
COLD = 'cold-migrate'
EVACUATE = 'evacuate'
NOTIFY = 'notify'
SKIP = 'skip'
MOVES = (LIVE, COLD, EVACUATE)

KIND_VGPU = 'vgpu'
KIND_PASSTHROUGH = 'passthrough'
#: a server of the host that holds no GPU (``drain --all-servers``)
KIND_NO_GPU = 'no-gpu'

# Nova's vm states a server can be live- / cold-migrated from
_LIVE_STATUSES = ('ACTIVE', 'PAUSED')
_COLD_STATUSES = ('ACTIVE', 'SHUTOFF')
# Nova refuses to evacuate a server in these
_NO_EVACUATE_STATUSES = ('SHELVED_OFFLOADED', 'DELETED', 'SOFT_DELETED')


@dataclasses.dataclass(frozen=True)
class Trigger:
    """Why servers are looked at: a GPU turned unhealthy, a host drained."""

    host: str
    reason: str
    gpu: str | None = None      # PCI address; None: the whole host
    source: str = 'notification'  # notification | sweep | drain


@dataclasses.dataclass(frozen=True)
class ServerFacts:
    """What Nova and Placement say about one server on the GPU (or host)."""

    id: str
    host: str
    gpu: str | None
    kind: str                   # vgpu | passthrough | no-gpu
    exists: bool = True         # False: a consumer Nova does not know
    name: str | None = None
    status: str | None = None
    task_state: str | None = None
    metadata: dict = dataclasses.field(default_factory=dict)
    running_on: str | None = None  # the server's host in Nova


@dataclasses.dataclass(frozen=True)
class Decision:
    server: str
    host: str
    gpu: str | None
    action: str                 # LIVE | COLD | EVACUATE | NOTIFY | SKIP
    reason: str                 # why this action (or why nothing)
    name: str | None = None
    fallback: str | None = None  # COLD after a refused LIVE

    @property
    def moves(self) -> bool:
        return self.action in MOVES


def decide(trigger: Trigger, servers: Iterable[ServerFacts], policy: str,
           compute_up: bool, passthrough_live: bool = False
           ) -> list[Decision]:
    """One decision per server, in server id order.

    :param policy: ``notify``, ``migrate`` or ``evacuate`` (see
        ``[remediation] policy``)
    :param compute_up: whether the nova-compute service of
        ``trigger.host`` is up
    :param passthrough_live: try live migration for passthrough GPUs
    """
    out = []
    for s in sorted(servers, key=lambda s: s.id):
        action, reason = _one(s, policy, compute_up, passthrough_live)
        fallback = COLD if (action == LIVE and s.status == 'ACTIVE') else None
        out.append(Decision(server=s.id, host=s.host, gpu=s.gpu,
                            action=action, reason=reason, name=s.name,
                            fallback=fallback))
    return out


def _one(s: ServerFacts, policy: str, compute_up: bool,
         passthrough_live: bool) -> tuple[str, str]:
    if not s.exists:
        return SKIP, ('consumer %s of the GPU is no server Nova knows (a '
                      'migration in progress, or a server deleted since)'
                      % s.id)
    if s.running_on and s.running_on != s.host:
        return SKIP, ('runs on %s already (Nova keeps its allocation on %s '
                      'until nova-compute there restarts)'
                      % (s.running_on, s.host))
    if s.metadata.get(OPT_OUT_KEY) == OPT_OUT_VALUE:
        return SKIP, 'metadata %s=%s' % (OPT_OUT_KEY, OPT_OUT_VALUE)
    if policy == 'notify':
        return NOTIFY, '[remediation] policy = notify'
    if s.task_state:
        return SKIP, ('busy (task state %s): look again when it is done'
                      % s.task_state)
    if not compute_up:
        if policy != 'evacuate':
            return SKIP, ('nova-compute on %s is down: set [remediation] '
                          'policy = evacuate to evacuate its servers'
                          % s.host)
        if s.status in _NO_EVACUATE_STATUSES:
            return SKIP, 'status %s cannot be evacuated' % s.status
        return EVACUATE, 'nova-compute on %s is down' % s.host
    live_ok = s.kind in (KIND_VGPU, KIND_NO_GPU) or passthrough_live
    if live_ok and s.status in _LIVE_STATUSES:
        return LIVE, '%s server, status %s' % (s.kind, s.status)
    if s.status in _COLD_STATUSES:
        why = ('passthrough server without live-migratable GPUs'
               if s.kind == KIND_PASSTHROUGH else 'status %s' % s.status)
        return COLD, why
    return SKIP, 'status %s: Nova moves no server in it' % s.status


def next_batch(pending: Iterable[Decision],
               in_flight: collections.Counter, max_total: int,
               max_per_host: int) -> list[Decision]:
    """The pending moves that may start now, in order.

    :param in_flight: moves in flight by source host
    """
    running = collections.Counter(in_flight)
    total = sum(running.values())
    out = []
    for d in pending:
        if total >= max_total:
            break
        if running[d.host] >= max_per_host:
            continue
        out.append(d)
        running[d.host] += 1
        total += 1
    return out


def retry_delays(max_retries: int, backoff: float) -> list[float]:
    """Seconds to wait before each retry: ``backoff`` doubling."""
    return [backoff * (2 ** n) for n in range(max_retries)]


def summary(decisions: Iterable[Decision]) -> dict[str, int]:
    """Decisions counted by action."""
    return dict(collections.Counter(d.action for d in decisions))
