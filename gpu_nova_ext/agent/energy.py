# SPDX-License-Identifier: Apache-2.0

"""Energy per server, from the GPUs' energy counters.

Each sample's ``energy_j`` is a GPU's cumulative counter (NVML's
``nvmlDeviceGetTotalEnergyConsumption`` through the total-energy field,
millijoules since the driver loaded; the hwmon ``energy1_input``,
microjoules, where the kernel has one).  Between two samples the GPU's
increase goes to the server(s) on it: all of it to the server holding the
whole GPU (passthrough, ``instance_uuid`` from libvirt), or split between
the servers of its vGPUs by their SM utilization (evenly when none is
reported).  Energy while no server is on the GPU stays with the GPU
(``idle``).  A counter that goes back (a driver reload) starts afresh.

The totals are since the agent started; ``gpu_nova_ext_server_energy
_joules`` exports them, so Prometheus' ``increase()`` or
``openstack gpu audit --energy-window`` turn them into energy over a
window.
"""
import collections
import threading

#: seconds a server's total is kept (and exported) after it left its GPU
RETAIN_S = 3600.0
#: seconds between two looks for servers to forget
PRUNE_S = 60.0


def shares(sample) -> dict[str, float]:
    """Server -> fraction of the GPU's energy between two samples.

    The fractions of vGPUs whose server is unknown, and of a GPU nobody
    uses, are left out (they stay with the GPU as idle energy).
    """
    if sample.instance_uuid:
        return {sample.instance_uuid: 1.0}
    vgpus = sample.vgpus
    if not any(v.get('instance_uuid') for v in vgpus):
        return {}
    total = sum(v.get('sm_util_pct') or 0 for v in vgpus)
    weights: dict[str, float] = collections.defaultdict(float)
    for v in vgpus:
        server = v.get('instance_uuid')
        if server:
            weights[server] += ((v.get('sm_util_pct') or 0) / total
                                if total else 1.0 / len(vgpus))
    return dict(weights)


class EnergyLedger:
    """Joules per server (and per GPU while idle) since the agent started."""

    def __init__(self):
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._servers: dict[str, float] = collections.defaultdict(float)
        #: server -> the PCI bus id of the GPU it used last
        self._where: dict[str, str] = {}
        self._idle: dict[str, float] = collections.defaultdict(float)
        self._seen: dict[str, float] = {}
        self._pruned_at = float('-inf')

    def add(self, samples, now: float) -> None:
        """Attribute the energy since the last samples (``now``: clock)."""
        with self._lock:
            for sample in samples:
                joules = sample.metrics.get('energy_j')
                if joules is None or sample.lost:
                    continue
                split = shares(sample)
                for server in split:
                    self._seen[server] = now
                before = self._last.get(sample.pci_address)
                self._last[sample.pci_address] = joules
                if before is None or joules <= before:
                    continue
                delta = joules - before
                rest = 1.0 - sum(split.values())
                if rest > 1e-9:
                    self._idle[sample.pci_address] += delta * rest
                for server, fraction in split.items():
                    self._servers[server] += delta * fraction
                    self._where[server] = sample.bus_id
            if now - self._pruned_at > PRUNE_S:
                self._pruned_at = now
                for server, seen in list(self._seen.items()):
                    if now - seen > RETAIN_S:
                        del self._seen[server]
                        self._servers.pop(server, None)
                        self._where.pop(server, None)

    def by_server(self) -> dict[str, tuple[str, float]]:
        """server -> (PCI bus id of its GPU, joules)."""
        with self._lock:
            return {s: (self._where[s], j)
                    for s, j in self._servers.items()}

    def idle(self) -> dict[str, float]:
        with self._lock:
            return dict(self._idle)
