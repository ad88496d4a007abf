# SPDX-License-Identifier: Apache-2.0

"""The remediation controller: reads the servers of an unhealthy GPU (or a
drained host), decides with :mod:`remediation_policy` and carries the
decisions out through Nova within the concurrency limits.

Every decision is logged, notified (:mod:`notifications`) and
reported to ``report`` (a callable taking one line: the command prints it).
A failed move is retried with backoff ``[remediation] max_retries`` times,
then reported and left alone.  Unless ``[remediation] enabled``, nothing is
moved: each move is reported as what it would be.
"""
import collections
import dataclasses
import threading
import time

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import notifications as rnotify
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import remediation_policy as policy

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class Result:
    decision: policy.Decision
    outcome: str                # moved | failed | skipped | notified | would-*
    destination: str | None = None
    error: str | None = None
    seconds: float = 0.0
    attempts: int = 0


class Remediator:
    """One controller.

    ``conn`` is an openstacksdk connection, ``placement`` a
    :class:`~gpu_nova_ext.placement.client.PlacementClient`.
    """

    def __init__(self, conf, conn, placement, notifier=None, report=None,
                 sleep=time.sleep, dry_run: bool | None = None):
        self.conf = conf
        self.opts = conf.remediation
        self.conn = conn
        self.placement = placement
        self.notifier = notifier or rnotify.Notifier(conf)
        self.report = report or (lambda line: None)
        self.sleep = sleep
        self._dry_run = dry_run
        self._lock = threading.Condition()
        self._in_flight: collections.Counter = collections.Counter()
        self._busy: set[str] = set()
        #: the most moves seen in flight at once (cloud-wide, per host)
        self.peak_in_flight = 0
        self.peak_in_flight_per_host = 0

    @property
    def dry_run(self) -> bool:
        if self._dry_run is not None:
            return self._dry_run
        return not self.opts.enabled

    # -- deciding ---------------------------------------------------------

    def plan(self, trigger: policy.Trigger,
             policy_name: str | None = None) -> list[policy.Decision]:
        """The decisions for the servers of ``trigger``'s GPU (or host)."""
        service = nova_actions.compute_service(self.conn, trigger.host)
        found = gpu_consumers.consumers(self.placement, trigger.host,
                                        trigger.gpu)
        facts = [nova_actions.server_facts(self.conn, c) for c in found]
        return policy.decide(
            trigger, facts, policy_name or self.opts.policy,
            compute_up=nova_actions.service_up(service),
            passthrough_live=self.opts.passthrough_live_migration)

    # -- acting -----------------------------------------------------------

    def run(self, trigger: policy.Trigger,
            policy_name: str | None = None) -> list[Result]:
        """Plan and carry out; returns one Result per server."""
        decisions = self.plan(trigger, policy_name)
        if not decisions:
            self.report('%s: no server on %s%s' % (
                trigger.host, 'GPU %s' % trigger.gpu if trigger.gpu
                else 'its GPUs', ' (%s)' % trigger.reason))
        return self.execute(trigger, decisions)

    def execute(self, trigger: policy.Trigger,
                decisions: list[policy.Decision]) -> list[Result]:
        results = []
        moves = []
        for d in decisions:
            LOG.info('%(host)s GPU %(gpu)s server %(server)s: %(action)s '
                     '(%(reason)s)', {'host': d.host, 'gpu': d.gpu,
                                      'server': d.server,
                                      'action': d.action,
                                      'reason': d.reason})
            if d.moves and not self.dry_run:
                moves.append(d)
                continue
            outcome = ('would-%s' % d.action if d.moves else
                       'notified' if d.action == policy.NOTIFY else
                       'skipped')
            results.append(self._finish(trigger, Result(d, outcome)))
        results += self._run_moves(trigger, moves)
        return results

    def _run_moves(self, trigger, moves) -> list[Result]:
        pending = [d for d in moves if d.server not in self._busy]
        results = [self._finish(trigger, Result(
            d, 'skipped', error='already being moved'))
            for d in moves if d.server in self._busy]
        done: list[Result] = []
        started = 0
        with self._lock:
            while pending or started > len(done):
                batch = policy.next_batch(
                    pending, self._in_flight, self.opts.max_concurrent,
                    self.opts.max_concurrent_per_host)
                for d in batch:
                    pending.remove(d)
                    self._in_flight[d.host] += 1
                    self._busy.add(d.server)
                    self.peak_in_flight = max(
                        self.peak_in_flight, sum(self._in_flight.values()))
                    self.peak_in_flight_per_host = max(
                        self.peak_in_flight_per_host, self._in_flight[d.host])
                    threading.Thread(
                        target=self._move_thread,
                        args=(trigger, d, done, len(moves)),
                        name='remediate-%s' % d.server, daemon=True).start()
                    started += 1
                if pending or started > len(done):
                    self._lock.wait(1.0)
        return results + done

    def _move_thread(self, trigger, decision, done, total):
        try:
            result = self._move(trigger, decision)
        except Exception as exc:  # never lose a server's outcome
            LOG.exception('Unexpected error moving %s', decision.server)
            result = self._finish(trigger, Result(
                decision, 'failed', error='unexpected error: %s' % exc))
        with self._lock:
            done.append(result)
            self.report('progress: %d of %d move(s) done' % (len(done),
                                                             total))
            self._in_flight[decision.host] -= 1
            self._busy.discard(decision.server)
            self._lock.notify_all()

    def _move(self, trigger, d: policy.Decision) -> Result:
        started = time.monotonic()
        self.notifier.notify(rnotify.START, rnotify.build_payload(
            d, trigger, False, 'started'))
        self.report('%s %s (%s) from %s GPU %s ...' % (
            d.action, d.server, d.name, d.host, d.gpu))
        delays = policy.retry_delays(self.opts.max_retries,
                                     self.opts.retry_backoff)
        action = d.action
        attempt = 0
        while True:
            attempt += 1
            try:
                before = nova_actions.migration_ids(self.conn, d.server)
                nova_actions.start_move(self.conn, d, action)
                server = nova_actions.wait_moved(
                    self.conn, d, action, self.opts.action_timeout,
                    self.opts.poll_interval, before=before)
                return self._finish(trigger, Result(
                    dataclasses.replace(d, action=action), 'moved',
                    destination=server.compute_host,
                    seconds=time.monotonic() - started, attempts=attempt))
            except exception.ServerGone as exc:
                return self._finish(trigger, Result(
                    d, 'failed', error=exc.format_message(),
                    attempts=attempt))
            except exception.NovaRefused as exc:
                error = exc.format_message()
                if action == policy.LIVE and d.fallback:
                    LOG.warning('%s; trying %s', error, d.fallback)
                    self.report('%s; trying %s' % (error, d.fallback))
                    action = d.fallback
                    continue
                if not delays:
                    return self._finish(trigger, Result(
                        dataclasses.replace(d, action=action), 'failed',
                        error=error, attempts=attempt,
                        seconds=time.monotonic() - started))
                delay = delays.pop(0)
                LOG.warning('%(error)s; retry in %(delay).0fs',
                            {'error': error, 'delay': delay})
                self.sleep(delay)
            except exception.ComputeUnavailable as exc:
                return self._finish(trigger, Result(
                    d, 'failed', error=exc.format_message(),
                    attempts=attempt))

    def _finish(self, trigger, result: Result) -> Result:
        d = result.decision
        event = rnotify.ERROR if result.outcome == 'failed' else rnotify.END
        self.notifier.notify(event, rnotify.build_payload(
            d, trigger, self.dry_run and not result.outcome == 'moved',
            result.outcome, destination=result.destination,
            error=result.error))
        self.report(format_result(result))
        if result.outcome == 'failed':
            LOG.error('%(host)s GPU %(gpu)s server %(server)s: %(action)s '
                      'failed after %(n)d attempt(s): %(error)s',
                      {'host': d.host, 'gpu': d.gpu, 'server': d.server,
                       'action': d.action, 'n': result.attempts,
                       'error': result.error})
        return result


def format_result(r: Result) -> str:
    d = r.decision
    what = '%s (%s) on %s GPU %s' % (d.server, d.name or '-', d.host,
                                     d.gpu or '-')
    if r.outcome == 'moved':
        return 'moved %s to %s by %s in %.1fs' % (
            what, r.destination, d.action, r.seconds)
    if r.outcome == 'failed':
        return 'FAILED %s %s: %s' % (d.action, what, r.error)
    if r.outcome.startswith('would-'):
        return 'dry run: would %s %s (%s)' % (d.action, what, d.reason)
    return '%s %s: %s' % (r.outcome, what, d.reason)
