# SPDX-License-Identifier: Apache-2.0

"""Driver roll-outs carried out: the waves of a plan (:mod:`rollout`)
one after the other (the design document's *Remediation, drains and
driver roll-outs*).

For each wave: the capacity guard is checked again from the live view
(:func:`guard_problems`), each host is drained (the caller's ``drain``:
``openstack gpu host drain``'s code), the operator's upgrade command runs
for each host (:class:`UpgradeCommand`, in parallel), each host is
awaited until its agent reports the target driver branch on healthy GPUs
(:func:`rollout.undrain_check`, as ``host undrain`` decides, and
:func:`health_problems`) and undrained.  The first host that fails stops
the run; it stays drained.

Where each host got to is a :class:`RunState`, written atomically to the
state file after every step (:func:`save`), so that a run carries on
from it (``--resume``): done hosts are skipped, a failed host retries the
step it failed at.
"""
import collections
from collections.abc import Callable
import concurrent.futures
import dataclasses
import json
import shlex
import subprocess
import threading
import time

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext import files
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import notifications
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.state import schema

LOG = logging.getLogger(__name__)

#: the steps a host goes through, in order; a host's ``step`` is the last
#: one it completed
PENDING = 'pending'
DRAINED = 'drained'
UPGRADED = 'upgraded'
DONE = 'done'
STEPS = (PENDING, DRAINED, UPGRADED, DONE)
#: what a host does next, after each step (said when it fails)
NEXT = {PENDING: 'drain', DRAINED: 'upgrade', UPGRADED: 'wait'}
STATE_VERSION = 1
HEALTHY = schema.HEALTH_STATES[0]


# -- records and the state file --------------------------------------------

@dataclasses.dataclass(kw_only=True, slots=True)
class HostProgress:
    step: str = PENDING          # the last step it completed
    failed: str | None = None    # why its next step failed


@dataclasses.dataclass(kw_only=True, slots=True)
class Wave:
    hosts: list[str]
    down: dict[str, int]         # capacity it takes out, by pool
    over_limit: list[str] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(kw_only=True, slots=True)
class RunState:
    """A roll-out: its plan and where each host got to."""

    driver: str                  # as given: a branch or a version
    max_unavailable: float       # percent
    totals: dict[str, int]       # capacity by pool, of the plan
    allowed: dict[str, int]      # capacity that may be out at once
    waves: list[Wave]
    hosts: dict[str, HostProgress]

    @property
    def target(self) -> str:
        """The driver branch every GPU must run."""
        return rollout.branch(self.driver)

    @classmethod
    def from_plan(cls, plan: rollout.RolloutPlan, driver: str,
                  max_unavailable: float) -> 'RunState':
        waves = [Wave(hosts=list(b.hosts), down=dict(b.down),
                      over_limit=list(b.over_limit)) for b in plan.batches]
        return cls(driver=driver, max_unavailable=max_unavailable,
                   totals=dict(plan.totals), allowed=dict(plan.allowed),
                   waves=waves,
                   hosts={h: HostProgress() for w in waves for h in w.hosts})

    def to_dict(self) -> dict:
        return {'version': STATE_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_dict(cls, data: dict) -> 'RunState':
        return cls(driver=str(data['driver']),
                   max_unavailable=float(data['max_unavailable']),
                   totals=dict(data['totals']),
                   allowed=dict(data['allowed']),
                   waves=[Wave(**w) for w in data['waves']],
                   hosts={h: HostProgress(**p)
                          for h, p in data['hosts'].items()})

    @property
    def finished(self) -> bool:
        return all(p.step == DONE for p in self.hosts.values())

    def failures(self) -> list[tuple[str, str]]:
        """(host, why) of the hosts that failed, in wave order."""
        return [(h, self.hosts[h].failed) for w in self.waves
                for h in w.hosts if self.hosts[h].failed]


def save(path: str, state: RunState) -> None:
    """Write ``state`` to ``path`` atomically (:func:`files.write_atomic`).

    A reader sees the old file or the new one, never half of one.
    """
    files.write_atomic(path, json.dumps(state.to_dict(), indent=1,
                                        sort_keys=True) + '\n',
                       option='--state-file', mode=0o600)


def load(path: str) -> RunState:
    """The roll-out of a state file; a bad one is an InvalidArgument."""
    why = _load_problem(path)
    if isinstance(why, RunState):
        return why
    raise exception.InvalidArgument(argument='--state-file', value=path,
                                    reason=why)


def _load_problem(path: str) -> RunState | str:
    """The state in ``path``, or why there is none."""
    again = 'give the file a roll-out wrote'
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return ('no such file: --resume carries on the roll-out whose '
                'state it holds; start one without --resume')
    except (OSError, ValueError) as exc:
        return 'cannot read it as JSON (%s); %s' % (exc, again)
    if not isinstance(data, dict) or data.get('version') != STATE_VERSION:
        return 'not a roll-out state of version %d; %s' % (STATE_VERSION,
                                                           again)
    try:
        state = RunState.from_dict(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        return 'a bad or missing field (%s: %s); %s' % (
            type(exc).__name__, exc, again)
    bad = sorted(p.step for p in state.hosts.values()
                 if p.step not in STEPS)
    if bad:
        return 'unknown step(s) %s; %s' % (', '.join(bad), again)
    return state


# -- the capacity guard (pure) ----------------------------------------------

def guard_problems(report: audit.AuditReport, out_hosts: set[str],
                   wave: Wave, allowed: dict[str, int]) -> list[str]:
    """Why ``wave`` may not start now; empty: it may.

    Out of service already: the GPUs of ``out_hosts`` (nova-compute
    disabled or down) outside the wave, and unhealthy GPUs.  With the
    wave's GPUs no pool may lose more than ``allowed``; a pool the plan
    marked over the limit for this wave (a host that alone holds more)
    may, when nothing else of it is out.
    """
    others: dict[str, collections.Counter] = collections.defaultdict(
        collections.Counter)
    wave_down: collections.Counter = collections.Counter()
    for g in report.gpus:
        pool = rollout.pool(g)
        if g.host in wave.hosts:
            wave_down[pool] += g.total
        elif g.host in out_hosts:
            others[pool][g.host] += g.total
        elif g.health == 'unhealthy':
            others[pool]['%s GPU %s (unhealthy)' % (g.host, g.address)] += (
                g.total)
    problems = []
    for pool, n in sorted(wave_down.items()):
        out = others[pool]
        already = sum(out.values())
        limit = allowed.get(pool, 0)
        if pool in wave.over_limit:
            if already:
                problems.append(
                    '%s: this wave alone takes %d (over the limit of %d, '
                    'as planned) and %d is out already (%s)' % (
                        pool, n, limit, already, _named(out)))
        elif already + n > limit:
            problems.append('%s: %d out already (%s) and %d of this wave '
                            'is more than the %d allowed' % (
                                pool, already, _named(out), n, limit))
    return problems


def _named(out: collections.Counter) -> str:
    return ', '.join('%s %d' % (what, n) for what, n in sorted(out.items()))


def agent_lags(state: dict | None, host: str, target: str) -> list[str]:
    """What the agent's state of ``host`` says is not ready yet.

    Each GPU not on branch ``target`` (as :func:`rollout.undrain_check`
    says it) and each one not healthy; no state at all, or a stale one
    (live or from Placement: :func:`live_state.gpu_states`).
    """
    if state is None:
        return ['no GPU state from gpu-nova-agent on %s yet' % host]
    if state.get('stale'):
        return ['the GPU state of %s is stale (%s)' % (
            host, live_state.describe(state))]
    return rollout.driver_lags(state, target)[1] + health_problems(state)


def health_problems(state: dict) -> list[str]:
    """One line per GPU of a live state payload that is not healthy."""
    out = []
    for g in state.get('gpus', []):
        health = g.get('health') or {}
        if health.get('state') != HEALTHY:
            out.append('GPU %s is %s%s' % (
                g.get('pci_address'), health.get('state') or
                'of unknown health', ' (%s)' % '; '.join(health['reasons'])
                if health.get('reasons') else ''))
    return out


# -- the upgrade command ------------------------------------------------------

@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class UpgradeCommand:
    """The operator's upgrade action, a template of ``{host}``, ``{driver}``.

    Without ``shell`` the template is split as a shell would
    (``shlex.split``) and each argument formatted: no shell runs, a host
    name is one argument whatever it holds.  With ``shell`` the whole
    line runs through ``/bin/sh -c``, the values quoted.
    """

    template: str
    shell: bool = False

    def argv(self, host: str, driver: str) -> list[str]:
        try:
            if self.shell:
                return ['/bin/sh', '-c', self.template.format(
                    host=shlex.quote(host), driver=shlex.quote(driver))]
            return [arg.format(host=host, driver=driver)
                    for arg in shlex.split(self.template)]
        except (KeyError, IndexError, ValueError) as exc:
            raise exception.InvalidArgument(
                argument='--upgrade-command', value=self.template,
                reason='%s: %s. The placeholders are {host} and {driver}; '
                       'write {{ and }} for a brace' % (
                           type(exc).__name__, exc))

    def text(self, host: str, driver: str) -> str:
        """The command as it would be typed."""
        return shlex.join(self.argv(host, driver))


@dataclasses.dataclass(kw_only=True, slots=True)
class Outcome:
    ok: bool
    reason: str | None = None   # why not: the exit code, the last line


def run_upgrade(argv: list[str], timeout: float,
                log_path: str | None = None) -> Outcome:
    """Run one upgrade command, its output together (and to ``log_path``).

    A failure's reason is the exit code and the last line the command
    wrote to its standard error, or to its standard output where it wrote
    nothing to standard error (ansible-playbook ends its output with the
    play recap, and with ``ANSIBLE_DISPLAY_FAILED_STDERR`` writes the
    failed task to standard error).
    """
    lines: list[tuple[bool, str]] = []   # (from stderr, line), as they came
    lock = threading.Lock()

    def read(pipe, err: bool) -> None:
        for raw in pipe:
            with lock:
                lines.append((err, raw.decode('utf-8', 'replace')))

    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        return Outcome(ok=False, reason='could not run %s: %s' % (
            argv[0], exc))
    readers = [threading.Thread(target=read, args=(pipe, err), daemon=True)
               for pipe, err in ((proc.stdout, False), (proc.stderr, True))]
    for reader in readers:
        reader.start()
    end = time.monotonic() + timeout
    try:
        rc = proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        rc = None
    for reader in readers:
        # a process it started may hold the pipes open: read until the
        # timeout, not longer
        reader.join(max(end - time.monotonic(), 1.0))
    with lock:
        got = list(lines)
    text = ''.join(line for _, line in got)
    if log_path:
        with open(log_path, 'w') as f:
            f.write(text)
    LOG.debug('%(argv)s exited %(rc)s:\n%(out)s',
              {'argv': argv, 'rc': rc, 'out': text})
    if rc == 0:
        return Outcome(ok=True)
    said = [(err, line.strip()) for err, line in got if line.strip()]
    errors = [line for err, line in said if err]
    last = said[-1][1] if said else 'no output'
    if rc is None:
        return Outcome(ok=False, reason='not done after %ds: %s' % (
            timeout, last))
    return Outcome(ok=False, reason='exit code %d: %s' % (
        rc, errors[-1] if errors else last))


# -- the cloud: the live view, the health gate, undrain -----------------------

class Cloud:
    """What a roll-out reads and changes in Nova and Placement.

    ``conn`` an openstacksdk connection, ``placement`` a PlacementClient;
    the agents' state is heard for ``state_wait`` seconds on ``conf``'s
    transport_url where it has one, else read from the agents' traits in
    Placement (:func:`live_state.gpu_states`; :attr:`source` says which,
    in the run's first line).
    """

    def __init__(self, conf, conn, placement, state_wait: float):
        self.conf = conf
        self.conn = conn
        self.placement = placement
        self.state_wait = state_wait
        #: whether the agents' live state is heard (else Placement's)
        self.live = live_state.is_live(conf, state_wait)

    @property
    def source(self) -> str:
        """Where the agents' state comes from, for the run's first line."""
        if self.live:
            return ("the agents' live state (%g s on transport_url)"
                    % self.state_wait)
        return ("the agents' CUSTOM_GPU_HOST_* traits in Placement (no "
                "transport_url)")

    def states(self, providers: list[audit.ProviderView] | None = None
               ) -> dict[str, dict]:
        if providers is None:
            providers = audit.collect(self.placement)
        return live_state.gpu_states(self.conf, self.state_wait, providers)

    def view(self) -> tuple[audit.AuditReport, set[str]]:
        """(the audit with health, the hosts whose nova-compute is out)."""
        providers = audit.collect(self.placement)
        report = audit.build_report(providers, self.states(providers))
        out = {s.host for s in nova_actions.call(
            self.conn, 'services', binary=nova_actions.COMPUTE_BINARY)
            if s.status == 'disabled' or not nova_actions.service_up(s)}
        return report, out

    def servers_left(self, host: str, all_servers: bool) -> list[str]:
        """``id (name)`` of the servers still running on ``host``.

        Those on its GPUs, or with ``all_servers`` any.
        """
        if all_servers:
            facts = nova_actions.host_servers(self.conn, host, set())
        else:
            facts = [nova_actions.server_facts(self.conn, c)
                     for c in gpu_consumers.consumers(self.placement, host)]
        return sorted({'%s (%s)' % (f.id, f.name or '-') for f in facts
                       if f.exists and f.running_on == host})

    def readiness(self, hosts: list[str], target: str
                  ) -> dict[str, list[str]]:
        """What keeps each host from being undrained (empty: nothing).

        As ``openstack gpu host undrain`` decides (agent state and
        Placement's driver traits), and every GPU healthy.  With the live
        state, Placement is read only once an agent says its GPUs run
        ``target``, healthy: not at every look during a host's reboot;
        without, every look reads it (the state is there).
        """
        providers = None if self.live else audit.collect(self.placement)
        states = self.states(providers or [])
        out = {h: agent_lags(states.get(h), h, target) for h in hosts}
        agreed = [h for h in hosts if not out[h]]
        if providers is None:
            providers = audit.collect(self.placement) if agreed else []
        for host in agreed:
            check = rollout.undrain_check(providers, states[host], host,
                                          target, live=self.live)
            out[host] = check.problems + (
                ['still to do: %s' % '; '.join(check.todo)]
                if check.todo else [])
        return out

    def undrain(self, host: str) -> None:
        nova_actions.set_service_status(self.conn, host, enabled=True)


# -- the run ------------------------------------------------------------------

class Runner:
    """Carries a :class:`RunState` out, wave by wave.

    :param drain: drains one host; raises GpuNovaExtException naming why
        it could not
    :param save: called with the state after every step
    :param log_prefix: each upgrade's output goes to ``PREFIX.HOST.log``
    :param say: takes one progress line
    :param notify: takes each step's notification (event type, payload:
        :mod:`gpu_nova_ext.operator.notifications`)
    """

    def __init__(self, state: RunState, *, cloud: Cloud,
                 drain: Callable[[str], None], upgrade: UpgradeCommand,
                 say: Callable[[str], None],
                 save: Callable[[RunState], None],
                 all_servers: bool = False,
                 upgrade_timeout: float = 3600.0,
                 wait_timeout: float = 900.0, poll_interval: float = 2.0,
                 log_prefix: str | None = None,
                 notify: Callable[[str, dict], None] | None = None,
                 clock=time.monotonic, sleep=time.sleep):
        self.state = state
        self.notify = notify or (lambda event_type, payload: None)
        self.wave_of = {h: n for n, w in enumerate(state.waves, 1)
                        for h in w.hosts}
        self.cloud = cloud
        self.drain = drain
        self.upgrade = upgrade
        self.say = say
        self._save = save
        self.all_servers = all_servers
        self.upgrade_timeout = upgrade_timeout
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        self.log_prefix = log_prefix
        self.clock = clock
        self.sleep = sleep

    def run(self) -> None:
        """Every wave; raises GpuNovaExtException at the first failure."""
        for p in self.state.hosts.values():
            p.failed = None
        self.say('GPU state from %s' % self.cloud.source)
        total = len(self.state.waves)
        for n, wave in enumerate(self.state.waves, 1):
            todo = [h for h in wave.hosts
                    if self.state.hosts[h].step != DONE]
            if not todo:
                continue
            self.say('wave %d/%d: %s (%s)' % (
                n, total, ', '.join(wave.hosts), describe_down(
                    wave, self.state.totals, self.state.allowed)))
            if any(self.state.hosts[h].step == PENDING for h in todo):
                self._guard(n, wave)
            self.notify(notifications.ROLLOUT_WAVE,
                        self._payload(wave=n, hosts=list(wave.hosts)))
            self._steps(todo)
        self.notify(notifications.ROLLOUT_END,
                    self._payload(hosts=len(self.state.hosts)))
        self.say('roll-out done: %d host(s) run driver branch %s' % (
            len(self.state.hosts), self.state.target))

    def _payload(self, **fields) -> dict:
        return {'version': notifications.PAYLOAD_VERSION,
                'target': self.state.target, 'driver': self.state.driver,
                'waves': len(self.state.waves), **fields}

    def _guard(self, n: int, wave: Wave) -> None:
        report, out = self.cloud.view()
        problems = guard_problems(report, out, wave, self.state.allowed)
        if problems:
            raise exception.GpuNovaExtException(
                'wave %d not started: it would take more capacity out '
                'than --max-unavailable %g%% allows: %s. Bring the hosts '
                'and GPUs that are out back (openstack gpu audit), then '
                'run again (--resume with the --state-file).' % (
                    n, self.state.max_unavailable, '; '.join(problems)))

    def _steps(self, hosts: list[str]) -> None:
        progress = self.state.hosts
        for host in hosts:
            if progress[host].step == PENDING:
                self.say('%s: draining' % host)
                try:
                    self.drain(host)
                    left = self.cloud.servers_left(host, self.all_servers)
                    if left:
                        raise exception.GpuNovaExtException(
                            '%d server(s) still on it: %s (each is listed '
                            'above with why it stays); move them or ask '
                            'their owners to' % (len(left), ', '.join(left)))
                except exception.GpuNovaExtException as exc:
                    self._fail(host, exc.format_message())
                self._advance(host, DRAINED)
        failed = self._upgrade([h for h in hosts
                                if progress[h].step == DRAINED])
        # the hosts upgraded come back before a failed one stops the run
        self._wait([h for h in hosts if progress[h].step == UPGRADED])
        if failed:
            self._stop()

    def _upgrade(self, hosts: list[str]) -> list[str]:
        """Upgrade ``hosts`` in parallel; those that failed."""
        if not hosts:
            return []
        argvs = {h: self.upgrade.argv(h, self.state.driver) for h in hosts}
        for host in hosts:
            self.say('%s: upgrading: %s' % (host, shlex.join(argvs[host])))
        with concurrent.futures.ThreadPoolExecutor(len(hosts)) as pool:
            futures = {h: pool.submit(run_upgrade, argvs[h],
                                      self.upgrade_timeout, self._log(h))
                       for h in hosts}
        failed = []
        for host in hosts:
            outcome = futures[host].result()
            if outcome.ok:
                self._advance(host, UPGRADED)
            else:
                failed.append(host)
                self._record_failure(host, 'upgrade command: %s%s' % (
                    outcome.reason, ' (output in %s)' % self._log(host)
                    if self._log(host) else ''))
        return failed

    def _log(self, host: str) -> str | None:
        """Where the output of the upgrade of ``host`` goes, if anywhere."""
        if not self.log_prefix:
            return None
        return '%s.%s.log' % (self.log_prefix, host)

    def _wait(self, hosts: list[str]) -> None:
        if not hosts:
            return
        target = self.state.target
        for host in hosts:
            self.say('%s: waiting for driver branch %s on healthy GPUs (at '
                     'most %ds)' % (host, target, self.wait_timeout))
        deadline = self.clock() + self.wait_timeout
        pending = list(hosts)
        while True:
            lags = self.cloud.readiness(pending, target)
            for host in list(pending):
                if not lags[host]:
                    self.cloud.undrain(host)
                    pending.remove(host)
                    self._advance(host, DONE)
            if not pending:
                return
            if self.clock() >= deadline:
                for host in pending:
                    self._record_failure(host, 'not ready after %ds: %s' % (
                        self.wait_timeout, '; '.join(lags[host])))
                self._stop()
            self.sleep(self.poll_interval)

    # -- bookkeeping ----------------------------------------------------------

    def _advance(self, host: str, step: str) -> None:
        self.state.hosts[host].step = step
        self._save(self.state)
        self.notify(notifications.ROLLOUT_HOST, self._payload(
            wave=self.wave_of[host], host=host, step=step, error=None))
        self.say('%s: %s' % (host, {DONE: 'undrained: every GPU runs '
                                    'driver branch %s and is healthy'
                                    % self.state.target}.get(step, step)))

    def _record_failure(self, host: str, reason: str) -> None:
        progress = self.state.hosts[host]
        progress.failed = '%s failed: %s' % (NEXT[progress.step], reason)
        self._save(self.state)
        self.notify(notifications.ROLLOUT_HOST_ERROR, self._payload(
            wave=self.wave_of[host], host=host, step=NEXT[progress.step],
            error=reason))
        LOG.error('Roll-out: %(host)s: %(reason)s',
                  {'host': host, 'reason': progress.failed})
        self.say('%s: FAILED at %s: %s' % (host, NEXT[progress.step],
                                           reason))

    def _fail(self, host: str, reason: str) -> None:
        self._record_failure(host, reason)
        self._stop()

    def _stop(self) -> None:
        host, why = self.state.failures()[0]
        raise exception.GpuNovaExtException(
            'roll-out stopped: %s: %s; %s stays drained (nova-compute '
            'disabled). Fix the cause, then run again (--resume with the '
            '--state-file).' % (host, why, host))


def describe_down(wave: Wave, totals: dict[str, int],
                  allowed: dict[str, int]) -> str:
    """``down: A100_80GB_PCIE vgpu 32 of 96, at most 32``."""
    return 'down: %s' % '; '.join(
        '%s %d of %d, at most %d%s' % (
            pool, n, totals.get(pool, 0), allowed.get(pool, 0),
            ' (OVER LIMIT: a host alone holds more)'
            if pool in wave.over_limit else '')
        for pool, n in sorted(wave.down.items()))
