# SPDX-License-Identifier: Apache-2.0

"""Learned baselines and sustained-deviation anomalies."""
import random

from oslotest import base

from gpu_nova_ext.agent import anomaly
from gpu_nova_ext.tests.unit.agent import health_base


class TestAnomalyDetector(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.det = anomaly.AnomalyDetector(threshold=0.2, window=5.0,
                                           alpha=0.05)
        self.rng = random.Random(42)

    def feed(self, t0, n, value, noise=0.0, dt=1.0):
        out = []
        for i in range(n):
            v = value * (1 + self.rng.uniform(-noise, noise))
            out.append(self.det.observe('gpu0', {'power_w': v}, t0 + i * dt))
        return out

    def test_no_anomaly_on_noise_within_threshold(self):
        results = self.feed(0, 2000, 200.0, noise=0.15)
        self.assertEqual([], [r for r in results if r])
        self.assertLess(max(self.det.scores('gpu0').values()), 1.0)

    def test_step_change_named_after_window(self):
        self.feed(0, 100, 200.0, noise=0.05)
        # a +50% step: deviating at once, anomaly after the 5 s window
        results = self.feed(100, 10, 300.0)
        self.assertEqual([[]] * 5, results[:5])
        self.assertEqual(['power_w'], results[5])
        self.assertGreater(self.det.scores('gpu0')['power_w'], 1.0)

    def test_short_spike_is_no_anomaly(self):
        self.feed(0, 100, 200.0, noise=0.05)
        self.assertEqual([[]] * 3, self.feed(100, 3, 400.0))
        self.assertEqual([[]] * 10, self.feed(103, 10, 200.0, noise=0.05))

    def test_baseline_not_learned_during_window(self):
        self.feed(0, 100, 200.0)
        before = self.det.baseline('gpu0', 'power_w').mean
        self.feed(100, 4, 300.0)
        self.assertEqual(before, self.det.baseline('gpu0', 'power_w').mean)

    def test_new_level_is_learned_eventually(self):
        self.feed(0, 100, 200.0)
        results = self.feed(100, 400, 300.0)
        self.assertEqual(['power_w'], results[10])
        self.assertEqual([], results[-1])

    def test_warmup(self):
        self.assertEqual([[]] * 20, self.feed(0, 20, 100.0, noise=0.9))

    def test_floor_for_small_values(self):
        # 0 W -> 3 W is not an anomaly: the floor is 20 W
        self.feed(0, 50, 0.0)
        self.assertEqual([[]] * 20, self.feed(50, 20, 3.0))


class TestAnomalyMarksDegraded(health_base.MonitorTestCase):

    def test_step_in_power_degrades_with_metric_named(self):
        for i in range(30):
            self.fake.set_metrics(0, power_mw=200000 + (i % 3) * 1000)
            self.assertEqual('healthy', self.state(i)[0])
        self.fake.set_metrics(0, power_mw=290000)
        states = [self.state(30 + i) for i in range(7)]
        self.assertEqual('healthy', states[0][0])
        self.assertEqual(('degraded', ['anomaly: power_w']), states[-1])
        self.assertEqual(1, self.changes)
