# SPDX-License-Identifier: Apache-2.0

"""gpu-nova-agent's loop: discover -> monitor -> cast state -> report.

Native threads, no eventlet.  :meth:`AgentService.run` starts the health
monitor and the state channel, then two steps, each in its own thread,
while the main thread only waits for signals:

* the state step, every ``[agent] report_interval`` seconds: discover the
  GPUs, apply the latest health and metrics, cast the state to the
  schedulers (with the provider UUIDs of the last Placement report), and
  hand the inventory to the Placement step.  It never waits for
  Placement: whatever Placement does (down, slow, never answering), the
  schedulers keep getting this host's state and health;
* the Placement step: waits (retrying, with a clear log line) until
  nova-compute has created this host's compute node provider, then brings
  Placement in line with each inventory handed to it; when that changes
  what the state says (provider UUIDs, assignments), the state is cast
  again at once.

Signals: SIGHUP runs both steps at once; SIGTERM / SIGINT exit within a
second or two, whatever the steps are doing (retry waits are cut short, a
request in flight is abandoned).  A failing step is logged and retried at
the next interval; the agent never exits because of one.  A scheduler
asking for state (``resend_gpu_state``) gets the state cast at once; a
health change runs both steps at once (the state is cast first, then
Placement gets the root's health traits, design doc: Placement ownership).
"""
from collections.abc import Callable
import contextlib
import signal
import threading
import time

from oslo_log import log as logging

from gpu_nova_ext.agent import mig_manager
from gpu_nova_ext.agent import override_scope
from gpu_nova_ext.agent import payload as payload_mod
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import reporter as preporter

LOG = logging.getLogger(__name__)

#: seconds the main thread waits at exit for the steps, and in all (the
#: steps, then the state channel and the monitor, stopped in parallel):
#: SIGTERM ends the process within about EXIT_BUDGET seconds
EXIT_GRACE = 0.5
EXIT_BUDGET = 1.3
#: backoff between looks for the compute node provider
COMPUTE_NODE_RETRY = (2.0, 30.0)


def _state_facts(inventory: base.HostInventory, root) -> tuple:
    """What a Placement report can change in the state payload."""
    return (root.uuid if root else None, tuple(
        (g.pci_address, tuple(g.provider_uuids), g.assigned,
         g.reserved_for)
        for g in inventory.gpus))


@contextlib.contextmanager
def _nvml(inventory):
    """pynvml, initialized, when the inventory has an NVIDIA GPU."""
    if not any(g.vendor == 'nvidia' for g in inventory.gpus):
        yield None
        return
    import pynvml
    pynvml.nvmlInit()
    try:
        yield pynvml
    finally:
        pynvml.nvmlShutdown()


def _default_discover(conf) -> base.HostInventory:
    from gpu_nova_ext.inventory import manager
    return manager.discover(conf)


class AgentService:
    """The agent.  ``run_cycle()`` is one cycle; ``run()`` the daemon.

    :param conf: the agent's ConfigOpts (``register_agent_opts`` applied
        and parsed).  Bad ``[agent]`` or missing ``[placement]`` options
        raise a typed error here, before anything starts.
    :param discover: ``discover(conf) -> HostInventory``; default
        :func:`gpu_nova_ext.inventory.manager.discover`.
    :param monitor: an object with ``start()``, ``stop()`` and
        ``apply(inventory)``; default: a
        :class:`gpu_nova_ext.agent.monitor.HealthMonitor` made by ``run()``.
    :param state_client: an object with ``start()``, ``stop()`` and
        ``cast_state(payload)``; default: a
        :class:`gpu_nova_ext.agent.state_client.AgentStateClient` made by
        ``run()``.
    :param client: a PlacementClient (default: from ``[placement]``).
    """

    def __init__(self, conf, *,
                 discover: Callable[..., base.HostInventory] | None = None,
                 monitor=None, state_client=None,
                 client: pclient.PlacementClient | None = None):
        self.conf = conf
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._cycle_requested = threading.Event()
        self._resend_requested = threading.Event()
        self._report_wake = threading.Event()
        self._pending: base.HostInventory | None = None
        self._lock = threading.RLock()
        self.client = client or pclient.PlacementClient(conf,
                                                        abort=self._stop)
        self.reporter = preporter.Reporter(conf, self.client)
        # [mig] layouts are checked now: a bad one stops the start
        self.mig = mig_manager.MigManager(conf)
        self.power = power_policy.PowerPolicy(conf)
        self._discover = discover or _default_discover
        self.monitor = monitor
        self.state_client = state_client
        self.last_inventory: base.HostInventory | None = None
        self.last_result: preporter.ReportResult | None = None
        self.last_payload: dict | None = None
        self.cycles = 0
        self.failed_cycles = 0
        self.exit_code = 0

    # -- one cycle ---------------------------------------------------------

    def run_cycle(self, dry_run: bool = False,
                  cast: bool = True) -> preporter.ReportResult:
        """discover -> monitor.apply -> report -> cast state, in this thread.

        When Placement fails, the state is still cast (with the provider
        UUIDs of the last good cycle) before the error propagates.
        """
        with self._lock:
            inventory = self._discover(self.conf)
            if not dry_run:
                self._apply_power(inventory)
            if self.monitor is not None:
                self.monitor.apply(inventory)
        try:
            result = self._report(inventory, dry_run=dry_run)
        except Exception:
            with self._lock:
                self._reuse_provider_uuids(inventory)
                if cast and not dry_run:
                    self._cast(inventory)
            raise
        with self._lock:
            self.last_inventory = inventory
            if cast and not dry_run:
                self._cast(inventory)
        return result

    def _report(self, inventory, dry_run: bool = False):
        result = self.reporter.report(inventory, dry_run=dry_run)
        self.last_result = result
        return result

    def _apply_power(self, inventory) -> None:
        """Keep ``[power] profiles`` on the GPUs (again after a reload)."""
        if not self.power.active:
            return

        def apply():
            with _nvml(inventory) as nvml:
                applied = self.power.apply(nvml, inventory)
            exporter = getattr(self.monitor, 'exporter', None)
            if exporter is not None:
                exporter.set_power(applied)

        self._guarded(apply, 'the power policy step')

    def check_power(self) -> None:
        """Refuse (InvalidOption) a ``[power]`` limit a GPU cannot take."""
        if not self.power.active:
            return
        try:
            inventory = self._discover(self.conf)
            with _nvml(inventory) as nvml:
                self.power.check(nvml, inventory)
        except exception.InvalidOption:
            raise
        except Exception as exc:  # noqa: the cycles apply and report it
            LOG.warning('Power limits not checked at start (%s); each '
                        'cycle checks them as it applies them', exc)

    def _reuse_provider_uuids(self, inventory, source=None,
                              force: bool = False):
        """Give ``inventory`` what a Placement report found out.

        :param source: the reported inventory (default: the last one).
        :param force: overwrite what ``inventory`` holds already.
        """
        source = source or self.last_inventory
        if source is None or source is inventory:
            return
        for gpu in inventory.gpus:
            old = source.gpu(gpu.pci_address)
            if old is not None and (force or not gpu.provider_uuids):
                gpu.provider_uuids = list(old.provider_uuids)
                gpu.assigned = old.assigned
                gpu.reserved_for = old.reserved_for

    def _cast(self, inventory) -> None:
        root = self.reporter.compute_node
        self.last_payload = payload_mod.build_payload(
            inventory, host=self.conf.host,
            nodename=root.name if root else None,
            root_provider_uuid=root.uuid if root else None,
            mode=self.conf.agent.mode)
        if self.state_client is not None:
            self.state_client.cast_state(self.last_payload)

    def cast_now(self) -> None:
        """Re-apply the latest samples to the last inventory and cast it."""
        with self._lock:
            if self.last_inventory is None:
                return
            if self.monitor is not None:
                self.monitor.apply(self.last_inventory)
            self._cast(self.last_inventory)

    # -- requests from signals and callbacks --------------------------------

    def trigger(self) -> None:
        """Run a full cycle as soon as possible (SIGHUP)."""
        self._cycle_requested.set()
        self._wake.set()

    def request_resend(self) -> None:
        """Cast the state as soon as possible (a scheduler asked)."""
        self._resend_requested.set()
        self._wake.set()

    def _on_health_change(self) -> None:
        # a full cycle: the state is cast at once (before Placement), then
        # the root's CUSTOM_GPU_UNHEALTHY_* traits (and in inventory mode
        # the reserved of our own providers) follow
        self.trigger()

    def stop(self) -> None:
        """Stop the daemon loop (SIGTERM); safe from any thread."""
        self._stop.set()
        self._wake.set()
        self._report_wake.set()

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    # -- the daemon --------------------------------------------------------

    def run(self) -> int:
        """Run until :meth:`stop` (or SIGTERM); returns the exit code."""
        self.check_power()
        self._install_signal_handlers()
        self._start_helpers()
        steps = [threading.Thread(target=self._forever, args=(loop,),
                                  name=name, daemon=True)
                 for loop, name in ((self._state_loop, 'gpu-agent-state'),
                                    (self._placement_loop,
                                     'gpu-agent-placement'))]
        for step in steps:
            step.start()
        try:
            while not self._stop.wait(0.2):
                pass
        except KeyboardInterrupt:
            self.stop()
        stopping = time.monotonic()
        for step in steps:
            step.join(max(0.0, stopping + EXIT_GRACE - time.monotonic()))
            if step.is_alive():
                LOG.warning('%s is still running; exiting without it',
                            step.name)
        self._stop_helpers(stopping + EXIT_BUDGET)
        LOG.info('gpu-nova-agent stopped')
        return self.exit_code

    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        signal.signal(signal.SIGHUP, lambda *a: self.trigger())
        signal.signal(signal.SIGTERM, lambda *a: self.stop())
        signal.signal(signal.SIGINT, lambda *a: self.stop())

    def _start_helpers(self) -> None:
        if self.monitor is None:
            try:
                from gpu_nova_ext.agent import monitor
                self.monitor = monitor.HealthMonitor(
                    self.conf, on_change=self._on_health_change)
            except ImportError as exc:
                LOG.warning('Health monitor unavailable (%s): no metrics '
                            'or health in the state', exc)
        if self.state_client is None:
            try:
                from gpu_nova_ext.agent import state_client
                self.state_client = state_client.AgentStateClient(
                    self.conf, on_resend=self.request_resend,
                    publisher=payload_mod.Publisher())
            except ImportError as exc:
                LOG.warning('State channel unavailable (%s): the '
                            'schedulers get no GPU state', exc)
        for helper in (self.monitor, self.state_client):
            if helper is None:
                continue
            try:
                helper.start()
            except Exception:
                LOG.exception('Could not start %s; continuing without it',
                              type(helper).__name__)

    def _stop_helpers(self, deadline: float) -> None:
        """Stop the state channel and the monitor, waiting until deadline.

        Closing a RabbitMQ connection can take seconds; the process exits
        without waiting for that (these are daemon threads).
        """
        stoppers = []
        for helper in (self.state_client, self.monitor):
            if helper is None:
                continue
            stopper = threading.Thread(
                target=self._guarded, name='gpu-agent-stop', daemon=True,
                args=(helper.stop, 'stopping %s' % type(helper).__name__))
            stopper.start()
            stoppers.append((stopper, type(helper).__name__))
        for stopper, name in stoppers:
            stopper.join(max(0.0, deadline - time.monotonic()))
            if stopper.is_alive():
                LOG.warning('%s did not stop in time; exiting without '
                            'waiting for it', name)

    def wait_for_compute_node(self) -> bool:
        """Wait until nova-compute created the compute node provider.

        Retries with backoff and logs each attempt; gives up after
        ``[agent] compute_node_wait_timeout`` seconds (0: never).
        :returns: False when it gave up or was stopped.
        """
        timeout = self.conf.agent.compute_node_wait_timeout
        start = time.monotonic()
        delay, max_delay = COMPUTE_NODE_RETRY
        while not self._stop.is_set():
            try:
                uuid, name = self.reporter.find_compute_node()
                LOG.info('Found compute node provider %(name)s (%(uuid)s)',
                         {'name': name, 'uuid': uuid})
                return True
            except exception.ComputeNodeNotFound as exc:
                reason = exc.format_message()
            except exception.GpuNovaExtException as exc:
                reason = exc.format_message()
            waited = time.monotonic() - start
            if timeout and waited >= timeout:
                LOG.error('Gave up waiting for the compute node provider '
                          'after %(t)ds ([agent] compute_node_wait_timeout):'
                          ' %(reason)s', {'t': timeout, 'reason': reason})
                return False
            LOG.warning('Waiting for nova-compute to create the compute '
                        'node resource provider of host %(host)s (next '
                        'look in %(d).0fs): %(reason)s',
                        {'host': self.conf.host, 'd': delay,
                         'reason': reason})
            self._stop.wait(delay)
            delay = min(delay * 2, max_delay)
        return False

    def _forever(self, loop) -> None:
        try:
            loop()
        except Exception:
            # Nothing in the loops should raise; never die silently if it
            # does.
            LOG.exception('The agent loop failed; stopping')
            self.exit_code = 1
            self.stop()

    def _state_loop(self) -> None:
        interval = self.conf.agent.report_interval
        next_due = 0.0
        while not self._stop.is_set():
            if (self._cycle_requested.is_set() or
                    time.monotonic() >= next_due):
                self._cycle_requested.clear()
                self._resend_requested.clear()
                self._guarded(self._state_step, 'the GPU state step')
                next_due = time.monotonic() + interval
            elif self._resend_requested.is_set():
                self._resend_requested.clear()
                self._guarded(self.cast_now, 'casting the GPU state')
            self._wake.wait(max(0.0, next_due - time.monotonic()))
            self._wake.clear()

    def _state_step(self) -> None:
        """discover -> monitor.apply -> cast; then hand it to Placement."""
        inventory = self._discover(self.conf)
        self._apply_power(inventory)
        with self._lock:
            if self.monitor is not None:
                self.monitor.apply(inventory)
            self._reuse_provider_uuids(inventory)
            self.last_inventory = inventory
            self._pending = inventory
            self._cast(inventory)
        self._report_wake.set()

    def _placement_loop(self) -> None:
        if not self.wait_for_compute_node():
            if not self._stop.is_set():
                self.exit_code = 1
                self.stop()
            return
        while not self._stop.is_set():
            self._report_wake.wait()
            self._report_wake.clear()
            with self._lock:
                inventory, self._pending = self._pending, None
            if inventory is None or self._stop.is_set():
                continue
            before = _state_facts(inventory, self.reporter.compute_node)
            self._guarded_cycle(inventory)
            self._guarded(self.refresh_aggregates,
                          'reading the host\'s aggregates')
            if self.mig.active:
                self._mig_step(inventory)
            if _state_facts(inventory, self.reporter.compute_node) != before:
                # the state cast before this report is out of date; a newer
                # inventory (discovered meanwhile) gets what it found too
                with self._lock:
                    if self.last_inventory is not None:
                        self._reuse_provider_uuids(
                            self.last_inventory, source=inventory,
                            force=True)
                self.request_resend()

    def refresh_aggregates(self) -> None:
        """Read the compute node provider's Placement aggregates.

        Only when ``[mig] aggregate_layouts`` or ``[power]
        aggregate_profiles`` has values; after a failed read they are
        unknown (None) and those values wait.
        """
        if not (self.mig.needs_aggregates or self.power.needs_aggregates):
            return
        root = (self.last_result.root_provider_uuid
                if self.last_result is not None else None)
        aggregates = override_scope.read_aggregates(self.client, root)
        self.mig.aggregates = self.power.aggregates = aggregates

    def _mig_step(self, inventory) -> None:
        """Lay out the GPUs that ``[mig] layouts`` names and nothing uses.

        After a change, a cycle at once: the vGPU types of the new GPU
        instances are discovered and reported like any other.
        """
        changed = []
        self._guarded(
            lambda: changed.append(self.mig.cycle(inventory, self.client)),
            'the MIG layout step')
        exporter = getattr(self.monitor, 'exporter', None)
        if exporter is not None:
            exporter.set_mig({o.plan.pci_address: o.status
                              for o in self.mig.last})
        if any(changed):
            self.trigger()

    def _guarded_cycle(self, inventory) -> None:
        start = time.monotonic()
        if self._guarded(lambda: self._report(inventory),
                         'the Placement step'):
            self.cycles += 1
            result = self.last_result
            LOG.info('Cycle done in %(t).2fs: %(n)d change(s), %(f)d not '
                     'applied, %(w)d write request(s) to Placement',
                     {'t': time.monotonic() - start, 'n': len(result.changes),
                      'f': len(result.not_applied), 'w': result.writes})
        else:
            self.failed_cycles += 1

    def _guarded(self, func, what) -> bool:
        try:
            func()
            return True
        except exception.GpuNovaExtException as exc:
            LOG.error('%(what)s failed, retrying next cycle: %(err)s',
                      {'what': what.capitalize(), 'err': exc})
        except Exception:
            LOG.exception('%s failed unexpectedly, retrying next cycle',
                          what.capitalize())
        return False
