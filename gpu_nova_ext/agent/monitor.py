# SPDX-License-Identifier: Apache-2.0

"""The health monitor: sampler + anomaly detector + judge + exporter.

A native thread samples every GPU (NVIDIA through NVML, AMD and Intel
through sysfs) at ``[agent]
metrics_interval``, learns baselines, judges health and publishes the
result to the Prometheus exporter.  A health change is logged (one line),
sent as a ``gpu.health.update`` notification and reported to the agent
through ``on_change`` so that it casts its state at once.  The agent's
cycle calls :meth:`HealthMonitor.apply` to put metrics and health into
the inventory it reports.  None of this needs Placement or the broker.
"""
import threading
import time
from typing import Callable

from oslo_log import log as logging

from gpu_nova_ext.agent import anomaly as anomaly_mod
from gpu_nova_ext.agent import attribution as attribution_mod
from gpu_nova_ext.agent import energy as energy_mod
from gpu_nova_ext.agent import exporter as exporter_mod
from gpu_nova_ext.agent import health as health_mod
from gpu_nova_ext.agent import metrics_http
from gpu_nova_ext.agent import notifications
from gpu_nova_ext.agent import samplers
from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

#: seconds between two attempts to initialize NVML when it is unavailable
REOPEN_INTERVAL_S = 60.0


class HealthMonitor:
    """Samples, judges and exports GPU health on this host.

    :param conf: the agent's ConfigOpts (``[agent]``, ``[health]``,
        ``[DEFAULT] host`` registered).
    :param on_change: called (without arguments) once after each sample in
        which the health of at least one GPU changed.
    :param host: host name for notifications and exporter labels
        (default ``[DEFAULT] host``).
    :param sampler: an object with ``open()``, ``sample()`` and ``close()``
        (default :class:`~gpu_nova_ext.agent.samplers.AllVendors`: NVML
        for NVIDIA, sysfs for AMD and Intel).
    :param clock: monotonic clock used by the judge and the anomaly
        detector (tests pass ``now`` to :meth:`sample_once` instead).
    :param notifier: default a
        :class:`~gpu_nova_ext.agent.notifications.HealthNotifier`.
    """

    def __init__(self, conf, on_change: Callable[[], None],
                 host: str | None = None, sampler=None,
                 clock: Callable[[], float] = time.monotonic,
                 notifier=None):
        self.conf = conf
        self.on_change = on_change
        self.host = host or conf.host
        self._clock = clock
        self.sampler = sampler or samplers.AllVendors(
            conf.agent.sysfs_root, clock=clock)
        self.judge = health_mod.HealthJudge(conf, clock=clock)
        self.attribution = attribution_mod.Attribution(
            conf.agent.libvirt_uri)
        self.detector = anomaly_mod.AnomalyDetector.from_conf(conf)
        self.energy = energy_mod.EnergyLedger()
        self.notifier = notifier or notifications.HealthNotifier(
            conf, self.host)
        self.exporter = None
        if conf.agent.prometheus_port:
            self.exporter = exporter_mod.Exporter(
                self.host, conf.agent.prometheus_bind_host,
                conf.agent.prometheus_port,
                workers=conf.agent.prometheus_workers,
                idle_timeout=conf.agent.prometheus_idle_timeout,
                max_connections=conf.agent.prometheus_max_connections,
                access=metrics_http.Access.from_conf(conf))
        self._opened = False
        self._open_failed_at = None
        self._latest: dict[str, tuple] = {}
        self._lock = threading.Lock()
        self._sample_lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = None

    # -- lifecycle ----------------------------------------------------------
    def open(self) -> bool:
        """Initialize NVML and find the GPUs now (``start()`` does it too).

        Returns False when NVML is unavailable (logged; retried later).
        XID events are watched from this moment on.
        """
        with self._sample_lock:
            return self._ensure_open(self._clock())

    def start(self) -> None:
        """Start the exporter (unless the port is 0) and the sampler."""
        if self._thread is not None:
            return
        if self.exporter is not None:
            try:
                self.exporter.start()
            except OSError as exc:
                LOG.error('Prometheus exporter cannot listen on %(host)s:'
                          '%(port)s: %(error)s; fix [agent] '
                          'prometheus_bind_host/prometheus_port.  '
                          'Sampling and health continue without it.',
                          {'host': self.exporter.bind_host,
                           'port': self.conf.agent.prometheus_port,
                           'error': exc})
        self._stop.clear()
        self._thread = threading.Thread(target=self._run,
                                        name='gpu-health-monitor',
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(30)
            self._thread = None
        if self.exporter is not None:
            self.exporter.stop()
        self.notifier.stop()
        with self._sample_lock:
            if self._opened:
                self.sampler.close()
                self._opened = False
            self.attribution.close()

    def _run(self) -> None:
        interval = self.conf.agent.metrics_interval
        deadline = time.monotonic()
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:
                LOG.exception('GPU health sample failed; retrying at the '
                              'next interval')
            deadline += interval
            delay = deadline - time.monotonic()
            if delay < 0:
                deadline = time.monotonic()
                delay = 0
            self._stop.wait(delay)

    def _ensure_open(self, now: float) -> bool:
        if self._opened:
            return True
        if (self._open_failed_at is not None
                and now - self._open_failed_at < REOPEN_INTERVAL_S):
            return False
        try:
            self.sampler.open()
        except Exception as exc:
            if self._open_failed_at is None:
                LOG.warning('No GPU sampler is available (%s): no GPU '
                            'metrics or health until one is (retrying '
                            'every %d s)',
                            exc, REOPEN_INTERVAL_S)
            self._open_failed_at = now
            return False
        self._opened = True
        self._open_failed_at = None
        return True

    # -- one sample ---------------------------------------------------------
    def sample_once(self, now: float | None = None
                    ) -> list[health_mod.Verdict]:
        """Sample every GPU once, judge, export, notify; return verdicts."""
        now = self._clock() if now is None else now
        with self._sample_lock:
            if not self._ensure_open(now):
                return []
            started = time.perf_counter()
            samples = self.sampler.sample()
            self.attribution.annotate(samples, now)
            self.energy.add(samples, now)
            verdicts, entries, changes = [], [], []
            for sample in samples:
                key = sample.pci_address
                found = ([] if sample.lost else
                         self.detector.observe(key, sample.metrics, now))
                verdict = self.judge.judge(sample, found, now)
                verdicts.append(verdict)
                entries.append({'sample': sample, 'state': verdict.state,
                                'scores': self.detector.scores(key)})
                if verdict.changed:
                    changes.append((sample, verdict))
            with self._lock:
                self._latest = {s.pci_address: (s, v)
                                for s, v in zip(samples, verdicts)}
            if self.exporter is not None:
                self.exporter.set_server_energy(self.energy.by_server())
                self.exporter.update(entries, time.perf_counter() - started)
        for sample, verdict in changes:
            self._report_change(sample, verdict)
        if changes:
            try:
                self.on_change()
            except Exception:
                LOG.exception('Health change callback failed')
        return verdicts

    def _report_change(self, sample, verdict) -> None:
        worse = (health_mod.RANK[verdict.state]
                 > health_mod.RANK[verdict.old_state])
        (LOG.warning if worse else LOG.info)(
            'GPU %(gpu)s (%(uuid)s) health %(old)s -> %(new)s: %(reasons)s',
            {'gpu': sample.pci_address, 'uuid': sample.uuid,
             'old': verdict.old_state, 'new': verdict.state,
             'reasons': '; '.join(verdict.reasons) or 'no cause left'})
        self.notifier.notify(notifications.build_payload(
            self.host, sample.pci_address, sample.uuid, sample.name,
            verdict.old_state, verdict.state, verdict.old_reasons,
            verdict.reasons))

    # -- the agent's view -----------------------------------------------------
    def apply(self, inventory: base.HostInventory) -> None:
        """Fill ``metrics`` and ``health`` of the inventory's GPUs."""
        with self._lock:
            latest = dict(self._latest)
        by_uuid = {s.uuid: (s, v) for s, v in latest.values() if s.uuid}
        for gpu in inventory.gpus:
            try:
                key = naming.normalize_pci_address(gpu.pci_address)
            except ValueError:
                key = gpu.pci_address
            entry = latest.get(key) or by_uuid.get(gpu.uuid)
            if entry is None:
                pin = self.judge.pinned(key, gpu.uuid)
                if pin is not None:
                    gpu.health = base.Health(pin[0], list(pin[1]))
                continue
            sample, verdict = entry
            for name, value in sample.metrics.items():
                if isinstance(value, (int, float)) and not isinstance(
                        value, bool):
                    gpu.metrics[name] = value
            if gpu.slowdown_temperature_c is None:
                gpu.slowdown_temperature_c = sample.metrics.get(
                    'slowdown_temperature_c')
            if gpu.shutdown_temperature_c is None:
                gpu.shutdown_temperature_c = sample.metrics.get(
                    'shutdown_temperature_c')
            if gpu.power_limit_w is None:
                gpu.power_limit_w = sample.metrics.get('power_limit_w')
            gpu.health = base.Health(verdict.state, list(verdict.reasons))

    def latest(self) -> dict[str, tuple]:
        """``{pci_address: (GpuSample, Verdict)}`` of the last sample."""
        with self._lock:
            return dict(self._latest)
