# SPDX-License-Identifier: Apache-2.0

"""A roll-out's progress as Prometheus metrics (``--metrics-file``).

``openstack gpu rollout run`` is a batch job on an admin host, not a
service Prometheus can scrape; batch jobs publish through the node
exporter's textfile collector: the file is rewritten (atomically) after
every step of every host, so a dashboard or an alert sees a wave stall or
a host fail while the run goes on.  Every series has the ``target`` label,
the driver branch the roll-out installs.
"""
import time

from prometheus_client import core
from prometheus_client import exposition

from gpu_nova_ext import files
from gpu_nova_ext.operator import rollout_run

PREFIX = 'gpu_nova_ext_rollout_'


class _StateCollector:
    """The metrics of one RunState (prometheus_client's collector API)."""

    def __init__(self, state: rollout_run.RunState, now: float):
        self.state = state
        self.now = now

    def collect(self):
        state = self.state
        labels = ['target']
        hosts = core.GaugeMetricFamily(
            PREFIX + 'hosts', 'Hosts of the roll-out by the last step '
            'they completed.', labels=labels + ['step'])
        for step in rollout_run.STEPS:
            hosts.add_metric([state.target, step], sum(
                1 for p in state.hosts.values() if p.step == step))
        yield hosts
        failed = core.GaugeMetricFamily(
            PREFIX + 'failed_hosts', 'Hosts whose next step failed (left '
            'drained until the roll-out is resumed).', labels=labels)
        failed.add_metric([state.target], len(state.failures()))
        yield failed
        waves = core.GaugeMetricFamily(
            PREFIX + 'waves', 'Waves of the roll-out.', labels=labels)
        waves.add_metric([state.target], len(state.waves))
        yield waves
        done = core.GaugeMetricFamily(
            PREFIX + 'waves_done', 'Waves whose every host is done.',
            labels=labels)
        done.add_metric([state.target], sum(
            1 for w in state.waves
            if all(state.hosts[h].step == rollout_run.DONE
                   for h in w.hosts)))
        yield done
        stamp = core.GaugeMetricFamily(
            PREFIX + 'last_update_timestamp_seconds', 'When the roll-out '
            'last wrote its state (Unix time).', labels=labels)
        stamp.add_metric([state.target], self.now)
        yield stamp


def text(state: rollout_run.RunState, now: float | None = None) -> str:
    """The metrics of ``state`` in Prometheus' text format."""
    registry = core.CollectorRegistry(auto_describe=False)
    registry.register(_StateCollector(
        state, time.time() if now is None else now))
    return exposition.generate_latest(registry).decode('utf-8')


def write(path: str, state: rollout_run.RunState) -> None:
    """Rewrite ``path`` (a ``.prom`` file of the textfile collector)."""
    files.write_atomic(path, text(state), option='--metrics-file')
