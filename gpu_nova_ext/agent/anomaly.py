# SPDX-License-Identifier: Apache-2.0

"""Per-GPU, per-metric learned baselines and sustained-deviation anomalies.

Each watched metric of each GPU keeps an exponentially weighted moving
average (EWMA) of its value and of its absolute deviation.  A sample that
differs from the baseline by more than ``[health] anomaly_threshold``
(relative to the baseline) and by more than three learned deviations is
*deviating*; a metric that keeps deviating for ``[health] anomaly_window``
seconds is an *anomaly* and marks the GPU degraded with the metric named.

While a metric deviates the baseline does not learn from it (a step change
must not be absorbed before the window ends); once the anomaly is
declared the baseline learns again, so a lasting new level is accepted as
normal after a while and the anomaly ends.
"""
import dataclasses

#: metrics watched, with the floor under which a baseline counts as this
#: value when computing a relative deviation (so 2 W on an idle 0 W GPU
#: is not an infinite deviation).
WATCHED_METRICS = {
    'temperature_c': 20.0,
    'memory_temperature_c': 20.0,
    'power_w': 20.0,
    'sm_clock_mhz': 100.0,
    'memory_clock_mhz': 100.0,
    'fan_speed_pct': 10.0,
}
#: samples before a baseline is trusted
WARMUP_SAMPLES = 10
DEVIATIONS = 3.0


@dataclasses.dataclass
class Baseline:
    mean: float
    dev: float = 0.0
    samples: int = 1
    deviating_since: float | None = None
    anomalous: bool = False
    score: float = 0.0


class AnomalyDetector:
    """Learns baselines and names the metrics in anomaly, per GPU key."""

    def __init__(self, threshold: float = 0.2, window: float = 60.0,
                 alpha: float = 0.05, metrics: dict | None = None):
        self.threshold = threshold
        self.window = window
        self.alpha = alpha
        self.metrics = WATCHED_METRICS if metrics is None else metrics
        self._baselines: dict[tuple[str, str], Baseline] = {}

    @classmethod
    def from_conf(cls, conf) -> 'AnomalyDetector':
        return cls(threshold=conf.health.anomaly_threshold,
                   window=conf.health.anomaly_window,
                   alpha=conf.health.baseline_alpha)

    def observe(self, gpu: str, metrics: dict, now: float) -> list[str]:
        """Learn from one sample; return the metrics in anomaly, sorted."""
        anomalies = []
        for name, floor in self.metrics.items():
            value = metrics.get(name)
            if value is None:
                continue
            value = float(value)
            key = (gpu, name)
            b = self._baselines.get(key)
            if b is None:
                self._baselines[key] = Baseline(mean=value)
                continue
            diff = abs(value - b.mean)
            rel = diff / max(abs(b.mean), floor)
            b.score = rel / self.threshold if self.threshold else 0.0
            deviating = (b.samples >= WARMUP_SAMPLES
                         and rel > self.threshold
                         and diff > DEVIATIONS * b.dev)
            if deviating:
                if b.deviating_since is None:
                    b.deviating_since = now
                if now - b.deviating_since >= self.window:
                    b.anomalous = True
            else:
                b.deviating_since = None
                b.anomalous = False
            if not deviating or b.anomalous:
                b.mean += self.alpha * (value - b.mean)
                b.dev += self.alpha * (diff - b.dev)
                b.samples += 1
            if b.anomalous:
                anomalies.append(name)
        return sorted(anomalies)

    def scores(self, gpu: str) -> dict[str, float]:
        """Last deviation of each metric in units of the threshold."""
        return {name: b.score for (g, name), b in self._baselines.items()
                if g == gpu}

    def baseline(self, gpu: str, metric: str) -> Baseline | None:
        return self._baselines.get((gpu, metric))

    def forget(self, gpu: str) -> None:
        for key in [k for k in self._baselines if k[0] == gpu]:
            del self._baselines[key]
