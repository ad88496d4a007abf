# SPDX-License-Identifier: Apache-2.0

"""Shared setup of the health-agent tests: agent options and a fake NVML."""
from oslo_config import cfg
from oslo_config import fixture as config_fixture
from oslotest import base

from gpu_nova_ext import conf as conf_mod
from gpu_nova_ext_dev.fakes import nvml as fake_nvml


def make_conf() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    conf_mod.register_agent_opts(conf)
    conf([], project='gpu-nova-ext', default_config_files=[],
         default_config_dirs=[])
    return conf


class HealthTestCase(base.BaseTestCase):
    """A fake NVML host and agent options with fast health timings."""

    GPUS = ('A100_80GB_PCIE', 'T4')

    def setUp(self):
        super().setUp()
        self.conf = make_conf()
        self.cfg = self.useFixture(config_fixture.Config(self.conf))
        self.cfg.config(host='cmp-1')
        # no AMD/Intel GPU of the machine running the tests is sampled
        self.cfg.config(group='agent', prometheus_port=0,
                        prometheus_bind_host='127.0.0.1',
                        metrics_interval=0.1,
                        sysfs_root='/nonexistent-sysfs',
                        libvirt_uri='test:///default')
        self.cfg.config(group='health', recovery_period=30.0,
                        xid_quiet_period=60.0, anomaly_window=5.0)
        self.fake = self.useFixture(fake_nvml.FakeNvml(list(self.GPUS)))


class RecordingNotifier:
    """Keeps the payloads the monitor would send.

    The transport is tested in test_notifications and functional tests.
    """

    def __init__(self):
        self.payloads = []

    def notify(self, payload):
        self.payloads.append(payload)

    def stop(self):
        pass


class MonitorTestCase(HealthTestCase):
    """A HealthMonitor on the fake NVML with a clock the test drives."""

    def setUp(self):
        super().setUp()
        self.changes = 0
        self.notifier = RecordingNotifier()
        self.monitor = self.make_monitor()

    def _on_change(self):
        self.changes += 1

    def make_monitor(self):
        from gpu_nova_ext.agent import monitor
        m = monitor.HealthMonitor(self.conf, self._on_change,
                                  clock=lambda: 0.0, notifier=self.notifier)
        self.assertTrue(m.open())
        self.addCleanup(m.stop)
        return m

    def state(self, now, gpu=0):
        verdicts = self.monitor.sample_once(now=now)
        return verdicts[gpu].state, verdicts[gpu].reasons
