# SPDX-License-Identifier: Apache-2.0

"""The agent's health judge on the simulated clock.

Each simulated host runs the agent's own
:class:`gpu_nova_ext.agent.health.HealthJudge`, built with the host's
agent options (``[health] recovery_period``, ``xid_quiet_period``, ...) and
the simulation's clock.  A sample of each GPU is made from the GPU's facts
as the scenario gives them and its events change them (``metrics:``,
``slowdown_temperature_c``, ``shutdown_temperature_c``), so health follows
the agent's rules: a GPU degrades (or fails) at the first sample with a
cause (temperature at the slowdown or shutdown threshold, thermal
throttling, uncorrectable ECC errors, ...) and recovers only after the
cause has been gone for ``recovery_period`` simulated seconds.  An event's
``xids`` reach the next sample, as NVML's event set delivers them to the
agent (``[health] fatal_xids`` fail the GPU, ``degrading_xids`` degrade it,
both held ``xid_quiet_period`` plus ``recovery_period``).

A GPU whose health the scenario sets itself (``health:`` in its facts or in
an event) reports that health; the judge decides for the others.

Samples come every ``[agent] metrics_interval`` simulated seconds, at
most once per step, and only on hosts where they can change something: a
host whose GPUs changed metrics since its last sample, or whose judge still
holds a cause.  Sampling the others would give the verdicts they already
have.  The agent's anomaly detector (baselines learnt over hours of real
metrics) does not run in the simulator.
"""
from gpu_nova_ext.agent import health as health_mod
from gpu_nova_ext.agent import sampler as sampler_mod
from gpu_nova_ext.inventory import base

#: GPU facts the judge reads from a sample's metrics
THRESHOLDS = ('slowdown_temperature_c', 'shutdown_temperature_c',
              'power_limit_w')


class HostHealth:
    """The health judge of one simulated host's agent."""

    def __init__(self, host, clock):
        self.host = host
        self.judge = health_mod.HealthJudge(host.conf, clock=clock)
        self.interval = host.conf.agent.metrics_interval
        self.last_sample: float | None = None
        #: metrics changed since the last sample
        self.dirty = True
        #: XIDs for the next sample, by GPU
        self._xids: dict[str, list[int]] = {}

    def xid(self, address: str, xids: list[int]) -> None:
        """XID events of a GPU, seen at the next sample."""
        self._xids.setdefault(address, []).extend(xids)
        self.dirty = True

    def judged(self, address: str) -> bool:
        """Whether the judge decides this GPU's health."""
        return 'health' not in self.host.facts.get(address, {})

    def active(self) -> bool:
        """Whether a sample now could change a verdict."""
        if self.dirty:
            return True
        for address in self.host.facts:
            current = self.judge.current(address)
            if current is not None and current[1]:
                return True
        return False

    def due(self, now: float) -> bool:
        return (self.dirty or self.last_sample is None
                or now - self.last_sample >= self.interval)

    def sample(self, now: float) -> list[health_mod.Verdict]:
        """Judge every judged GPU at ``now``; the verdicts that changed."""
        self.last_sample = now
        self.dirty = False
        changed = []
        for index, (address, facts) in enumerate(
                sorted(self.host.facts.items())):
            if not self.judged(address):
                self._xids.pop(address, None)
                continue
            metrics = {k: v for k, v in (facts.get('metrics') or {}).items()
                       if isinstance(v, (int, float))}
            for key in THRESHOLDS:
                if facts.get(key) is not None:
                    metrics.setdefault(key, facts[key])
            sample = sampler_mod.GpuSample(
                index=index, pci_address=address, bus_id=address,
                uuid=facts.get('uuid'), name=facts.get('name'),
                timestamp=now, metrics=metrics,
                xids=self._xids.pop(address, []),
                vendor=facts.get('vendor') or 'nvidia')
            verdict = self.judge.judge(sample, (), now)
            if verdict.changed:
                changed.append(verdict)
        return changed

    def apply(self, inventory: base.HostInventory) -> None:
        """Put the judge's verdicts in the inventory the agent reports."""
        for gpu in inventory.gpus:
            if not self.judged(gpu.pci_address):
                continue
            current = self.judge.current(gpu.pci_address)
            if current is not None:
                gpu.health = base.Health(current[0], list(current[1]))
