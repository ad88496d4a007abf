# SPDX-License-Identifier: Apache-2.0

"""The health judge: samples in, ``healthy``/``degraded``/``unhealthy`` out.

Each sample yields *causes* (a severity and a stable reason text).  A cause
is held from the moment it is seen until it has been absent for
``[health] recovery_period`` seconds; an XID cause is seen at the XID and
then stays for ``[health] xid_quiet_period`` before its recovery period
starts.  The state is the worst severity among held causes, so a GPU
degrades or fails at once and recovers only after a quiet time: a noisy
signal that crosses a threshold back and forth does not make it flap.
``unhealthy`` needs a fatal cause (fatal XID, uncorrectable ECC or AMD RAS
errors, row-remap failure, temperature at shutdown, GPU lost); every other
cause (thermal throttling, temperature at the slowdown threshold, ...)
degrades.  NVIDIA, AMD and Intel samples carry the same metric keys, so
the same rules, hysteresis and recovery apply to all three.
Operators pin GPUs with ``[health] pinned_unhealthy``/``pinned_healthy``.
"""
import dataclasses
import time
from typing import Callable

from oslo_log import log as logging

from gpu_nova_ext.agent import sampler as sampler_mod
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

HEALTHY = 'healthy'
DEGRADED = 'degraded'
UNHEALTHY = 'unhealthy'
RANK = {HEALTHY: 0, DEGRADED: 1, UNHEALTHY: 2}

#: degrees under the slowdown threshold the temperature must drop below
#: before the thermal cause counts as gone (on top of recovery_period).
THERMAL_HYSTERESIS_C = 3.0

#: consecutive samples with NVML errors before they degrade the GPU (one
#: transient error must not take a GPU out of preference for a recovery
#: period)
NVML_ERROR_SAMPLES = 3

#: NVIDIA XID catalogue: short descriptions for log lines and reasons.
XID_DESCRIPTIONS = {
    13: 'graphics engine exception', 31: 'GPU memory page fault',
    43: 'GPU stopped processing', 45: 'preemptive cleanup',
    48: 'double-bit ECC error', 61: 'internal micro-controller breakpoint',
    62: 'internal micro-controller halt', 63: 'ECC page retirement or row '
    'remapping recording event', 64: 'ECC page retirement or row remapper '
    'recording failure', 74: 'NVLink error', 79: 'GPU has fallen off the bus',
    92: 'high single-bit ECC error rate', 94: 'contained ECC error',
    95: 'uncontained ECC error', 119: 'GSP RPC timeout', 120: 'GSP error',
    140: 'unrecovered ECC error',
}


@dataclasses.dataclass
class _Held:
    severity: str
    first_seen: float
    last_seen: float
    hold_until: float


@dataclasses.dataclass
class _GpuState:
    state: str = HEALTHY
    reasons: tuple[str, ...] = ()
    held: dict[str, _Held] = dataclasses.field(default_factory=dict)
    error_samples: int = 0


@dataclasses.dataclass
class Verdict:
    """The judged health of one GPU after one sample."""

    key: str                 # PCI address
    uuid: str | None
    state: str
    reasons: list[str]
    old_state: str
    old_reasons: list[str]

    @property
    def changed(self) -> bool:
        return (self.state != self.old_state
                or self.reasons != self.old_reasons)


def _xid_set(values) -> set[int]:
    out = set()
    for v in values:
        try:
            out.add(int(str(v).strip()))
        except ValueError:
            LOG.warning('Ignoring XID %r: not an integer', v)
    return out


def _pins(values) -> set[str]:
    out = set()
    for v in values:
        v = v.strip()
        try:
            out.add(naming.normalize_pci_address(v))
        except ValueError:
            out.add(v)
    return out


class HealthJudge:
    """Turns samples into verdicts, with hysteresis and recovery."""

    def __init__(self, conf, clock: Callable[[], float] = time.monotonic):
        h = conf.health
        self.recovery_period = h.recovery_period
        self.xid_quiet_period = h.xid_quiet_period
        self.fatal_xids = _xid_set(h.fatal_xids)
        self.degrading_xids = _xid_set(h.degrading_xids)
        self.pinned_unhealthy = _pins(h.pinned_unhealthy)
        self.pinned_healthy = _pins(h.pinned_healthy)
        self._clock = clock
        self._gpus: dict[str, _GpuState] = {}

    def pinned(self, pci_address: str | None,
               uuid: str | None) -> tuple[str, list[str]] | None:
        """The operator's pin for a GPU, if any."""
        keys = {k for k in (pci_address, uuid) if k}
        if keys & self.pinned_unhealthy:
            return UNHEALTHY, ['pinned unhealthy by operator']
        if keys & self.pinned_healthy:
            return HEALTHY, []
        return None

    def current(self, key: str) -> tuple[str, list[str]] | None:
        st = self._gpus.get(key)
        return (st.state, list(st.reasons)) if st else None

    def causes(self, sample: sampler_mod.GpuSample,
               anomalies=()) -> list[tuple[str, str, float]]:
        """(severity, reason, extra hold seconds) seen in one sample."""
        out = []
        if sample.lost:
            out.append((UNHEALTHY, 'GPU lost (NVML: GPU is lost)'
                        if sample.vendor == 'nvidia' else
                        'GPU lost (gone from sysfs)', 0.0))
        for xid in sample.xids:
            text = XID_DESCRIPTIONS.get(xid, 'see NVIDIA XID catalogue')
            if xid in self.fatal_xids:
                out.append((UNHEALTHY, 'XID %d: %s' % (xid, text),
                            self.xid_quiet_period))
            elif xid in self.degrading_xids:
                out.append((DEGRADED, 'XID %d: %s' % (xid, text),
                            self.xid_quiet_period))
            else:
                LOG.debug('GPU %(gpu)s: XID %(xid)d is application-caused, '
                          'ignored for health',
                          {'gpu': sample.pci_address, 'xid': xid})
        m = sample.metrics
        if m.get('ecc_dbe_volatile'):
            out.append((UNHEALTHY, 'uncorrectable ECC errors'
                        if sample.vendor == 'nvidia' else
                        'uncorrectable RAS errors', 0.0))
        if m.get('remap_failure'):
            out.append((UNHEALTHY, 'row remapping failure', 0.0))
        if m.get('remapped_rows_pending'):
            out.append((DEGRADED, 'row remapping pending (reset needed)',
                        0.0))
        if m.get('retired_pages_pending'):
            out.append((DEGRADED, 'pages pending retirement (reset needed)',
                        0.0))
        if m.get('thermal_throttle'):
            out.append((DEGRADED, 'thermal throttling', 0.0))
        out.extend(self._thermal(sample))
        st = self._gpus.get(sample.pci_address)
        if (sample.errors and not sample.lost and st is not None
                and st.error_samples >= NVML_ERROR_SAMPLES):
            out.append((DEGRADED, 'NVML errors' if sample.vendor == 'nvidia'
                        else 'sysfs read errors', 0.0))
        for metric in anomalies:
            out.append((DEGRADED, 'anomaly: %s' % metric, 0.0))
        return out

    def _thermal(self, sample):
        m = sample.metrics
        temp = m.get('temperature_c')
        if temp is None:
            return []
        shutdown = m.get('shutdown_temperature_c')
        slowdown = m.get('slowdown_temperature_c')
        if shutdown and temp >= shutdown:
            return [(UNHEALTHY, 'temperature at or above shutdown threshold '
                     '(%g C)' % shutdown, 0.0)]
        if not slowdown:
            return []
        reason = 'temperature at or above slowdown threshold (%g C)' % (
            slowdown)
        held = self._gpus.get(sample.pci_address)
        if temp >= slowdown or (
                held and reason in held.held
                and temp > slowdown - THERMAL_HYSTERESIS_C):
            return [(DEGRADED, reason, 0.0)]
        return []

    def judge(self, sample: sampler_mod.GpuSample, anomalies=(),
              now: float | None = None) -> Verdict:
        now = self._clock() if now is None else now
        key = sample.pci_address
        st = self._gpus.setdefault(key, _GpuState())
        st.error_samples = st.error_samples + 1 if sample.errors else 0
        for severity, reason, extra in self.causes(sample, anomalies):
            held = st.held.get(reason)
            until = now + extra + self.recovery_period
            if held is None:
                st.held[reason] = _Held(severity, now, now, until)
            else:
                held.last_seen = now
                held.hold_until = max(held.hold_until, until)
        for reason in [r for r, h in st.held.items() if h.hold_until <= now]:
            del st.held[reason]
        old_state, old_reasons = st.state, list(st.reasons)
        pin = self.pinned(key, sample.uuid)
        if pin is not None:
            state, reasons = pin
        else:
            state = HEALTHY
            for h in st.held.values():
                if RANK[h.severity] > RANK[state]:
                    state = h.severity
            reasons = sorted(st.held, key=lambda r: (
                -RANK[st.held[r].severity], r))
        st.state, st.reasons = state, tuple(reasons)
        return Verdict(key, sample.uuid, state, list(reasons), old_state,
                       old_reasons)

    def forget(self, key: str) -> None:
        self._gpus.pop(key, None)
