# SPDX-License-Identifier: Apache-2.0

"""Capacity-planning figures of a run, kept up to date step by step.

* **GPU units**: a whole GPU is one unit; a vGPU is ``1 / n`` of its GPU
  when the GPU holds ``n`` of its type (the GPU's Placement inventory);
  a MIG-backed vGPU is its GPU instance's share of the GPU's compute
  slices (``2g.20gb``: 2/7 of an A100), whatever else the layout holds.
* **GPU allocation rate**: GPU units allocated / all GPUs; given with
  and without the units of misplaced servers (on a GPU their flavor's
  ``gpu:`` keys do not allow, :mod:`.misplaced`).
* **Arrived load**: GPU units requested by every server that arrived so
  far (placed, failed or since deleted), in % of all GPUs.  A flavor's
  units: what it asks of Placement (Nova's own resource request) divided
  by the mean capacity of the GPUs that could hold it (same resource
  class, and its ``gpu:model`` when it has one).
* **Fragmentation**: free GPU capacity that no flavor of the mix can use
  (too little left on the GPU, the host's CPU or RAM full, the GPU
  unhealthy, or no flavor for that GPU) / all free GPU capacity.
* **The curve** (``allocation_at``): the GPU allocation rate once the
  arrived load reached each of :data:`CURVE_PCT` (None: never reached);
  with the first failed GPU server and the multi-GPU servers placed of
  those arrived, what ``--compare`` sets side by side (design doc:
  Fragmentation-aware placement).
"""
import dataclasses
from typing import Any
import uuid

from gpu_nova_ext.inventory import mig_profiles
from gpu_nova_ext import naming
from gpu_nova_ext.operator import resource_classes
from gpu_nova_ext.simulate import nova_request


#: arrived loads (% of the GPUs) at which the curve is reported
CURVE_PCT = tuple(range(50, 131, 10))


def allocation_at(curve: list[tuple[float, float, float]]
                  ) -> list[dict[str, float | None]]:
    """The allocation rate at each of :data:`CURVE_PCT` arrived.

    After the first boot that brought the arrived load to the mark.
    """
    out = []
    points = iter(curve)
    point = next(points, None)
    for pct in CURVE_PCT:
        while point is not None and point[0] < pct - 1e-9:
            point = next(points, None)
        out.append({'arrived_pct': pct, 'gpu_allocation_pct':
                    None if point is None else point[1]})
    return out


@dataclasses.dataclass
class Gpu:
    host: Any                  # SimulatedHost
    address: str
    #: resource class -> instances the GPU holds of it (its providers'
    #: totals; a MIG layout of several sizes offers several classes)
    capacity: dict[str, int]
    #: resource class -> GPU units of one instance
    weight: dict[str, float]
    model: str
    used: dict[str, int] = dataclasses.field(default_factory=dict)

    def used_units(self) -> float:
        return sum(n * self.weight[rc] for rc, n in self.used.items())


@dataclasses.dataclass
class Need:
    """What one server of a flavor takes of a GPU."""

    resource_class: str
    amount: int
    model: str | None
    units: float = 0.0         # GPU units, see the module docstring


def _mig_units(rc: str) -> float | None:
    """GPU units of one instance of a MIG class, or None.

    ``CUSTOM_VGPU_MIG_2G_20GB`` -> 2/7: the profile's compute slices over
    its board's, from the first board of NVIDIA's tables with that
    profile name.
    """
    if not rc.startswith(resource_classes.MDEV_RC_PREFIX + 'MIG_'):
        return None
    for board in mig_profiles.BOARDS:
        for profile in board.profiles:
            if resource_classes.mig_resource_class(profile.name) == rc:
                return profile.compute_slices / board.compute_slices
    return None


def _pct(part: float, whole: float) -> float:
    return round(100.0 * part / whole, 2) if whole else 0.0


class Meter:
    """Per-GPU usage and arrivals of one run."""

    def __init__(self, scenario, hosts: dict):
        self.scenario = scenario
        self.hosts = hosts
        self.gpus: dict[tuple[str, str], Gpu] = {}
        for host in hosts.values():
            models = {g['pci_address']: g.get('model') or ''
                      for g in (host.payload or {}).get('gpus', [])}
            for address, rps in host.providers_of_gpu.items():
                known = [rp for rp in rps if rp in host.providers]
                if not known:
                    continue
                capacity: dict[str, int] = {}
                weight: dict[str, float] = {}
                for rp in known:
                    _function, rc, total = host.providers[rp]
                    capacity[rc] = capacity.get(rc, 0) + total
                    if rp in host.provider_units:
                        weight[rc] = host.provider_units[rp]
                for rc, total in capacity.items():
                    weight.setdefault(rc, 1.0 / total)
                self.gpus[(host.name, address)] = Gpu(
                    host=host, address=address, capacity=capacity,
                    weight=weight, model=models.get(address, ''))
        self.needs = {name: self._need(f)
                      for name, f in scenario.flavors.items()}
        self.used_units = 0.0
        #: units held by misplaced servers (included in used_units)
        self.misplaced_units = 0.0
        self.misplaced: set[str] = set()     # their instance UUIDs
        self.arrived_units = 0.0
        self.first_failure: dict[str, Any] | None = None
        if scenario.workload is not None:
            self.mix = list(scenario.workload.flavors)
        else:
            self.mix = sorted({s.flavor for s in scenario.steps
                               if hasattr(s, 'flavor')})

    def _need(self, flavor) -> Need | None:
        """The flavor's GPU request, from Nova's own resource request."""
        ctx = nova_request.admin_context()
        spec = nova_request.request_spec(ctx, flavor, str(uuid.uuid4()))
        resources = nova_request.resource_request(ctx, spec)
        classes = {rc for g in self.gpus.values() for rc in g.capacity}
        for rc, amount in resources.merged_resources().items():
            if rc in classes:
                model = flavor.extra_specs.get('gpu:model')
                need = Need(rc, int(amount), model)
                # per GPU that could hold it: instances per GPU unit
                fits = [1.0 / g.weight[rc] for g in self.gpus.values()
                        if self._fits_kind(g, need)]
                need.units = (amount * len(fits) / sum(fits)) if fits else 0
                return need
            units = _mig_units(rc)
            if units is not None:
                # a MIG size no GPU of this run offers: its arrivals count
                # all the same (a layout compared with one that has it
                # sees the same arrived load)
                return Need(rc, int(amount),
                            flavor.extra_specs.get('gpu:model'),
                            units=amount * units)
        return None

    @staticmethod
    def _fits_kind(gpu: Gpu, need: Need) -> bool:
        if need.resource_class not in gpu.capacity:
            return False
        return not need.model or any(
            naming.model_matches(m.strip(), gpu.model)
            for m in need.model.split(','))

    def needs_gpu(self, flavor: str) -> bool:
        return self.needs.get(flavor) is not None

    # -- updates -------------------------------------------------------------

    @property
    def arrived_pct(self) -> float:
        return _pct(self.arrived_units, len(self.gpus))

    @property
    def allocation_pct(self) -> float:
        return _pct(self.used_units, len(self.gpus))

    @property
    def placed_allocation_pct(self) -> float:
        """The allocation rate without misplaced servers."""
        return _pct(self.used_units - self.misplaced_units, len(self.gpus))

    def arrive(self, flavor) -> float:
        need = self.needs.get(flavor.name)
        if need is not None:
            self.arrived_units += need.units
        return self.arrived_pct

    def consumed(self, host, instance_uuid: str, sign: int) -> None:
        instance = host.instances[instance_uuid]
        for rp, amount in instance.allocations.items():
            gpu = self.gpus.get((host.name, host.gpu_of_provider.get(rp)))
            if gpu is not None and rp in host.providers:
                rc = host.providers[rp][1]
                gpu.used[rc] = gpu.used.get(rc, 0) + sign * amount
                units = sign * amount * gpu.weight[rc]
                self.used_units += units
                if instance_uuid in self.misplaced:
                    self.misplaced_units += units

    def failed(self, server, flavor) -> None:
        if self.first_failure is None and self.needs_gpu(flavor.name):
            self.first_failure = {
                'server': server.server, 'flavor': flavor.name,
                'arrived_pct': self.arrived_pct,
                'gpu_allocation_pct': self.allocation_pct,
                'fragmentation_pct': self.fragmentation_pct()}

    def point(self) -> tuple[float, float, float]:
        return (self.arrived_pct, self.allocation_pct,
                self.placed_allocation_pct)

    # -- figures -----------------------------------------------------------

    def fragmentation_pct(self) -> float:
        free = stranded = 0.0
        needs = [(self.scenario.flavors[n], self.needs[n]) for n in self.mix
                 if self.needs.get(n) is not None]
        for gpu in self.gpus.values():
            for rc, total in gpu.capacity.items():
                left = total - gpu.used.get(rc, 0)
                if left <= 0:
                    continue
                units = left * gpu.weight[rc]
                free += units
                if not any(self._usable(gpu, rc, left, f, n)
                           for f, n in needs):
                    stranded += units
        return _pct(stranded, free)

    @staticmethod
    def _usable(gpu: Gpu, rc: str, left: int, flavor, need: Need) -> bool:
        if (left < need.amount or need.resource_class != rc or
                not Meter._fits_kind(gpu, need)):
            return False
        host = gpu.host
        spec = host.spec
        health = host.facts.get(gpu.address, {}).get('health')
        if isinstance(health, dict):
            health = health.get('state')
        if health == 'unhealthy':
            return False
        return (host.used['vcpus'] + flavor.vcpus <=
                spec.vcpus * spec.cpu_allocation_ratio and
                host.used['memory_mb'] + flavor.ram_mb <=
                spec.memory_mb * spec.ram_allocation_ratio)

    def summary(self, result) -> dict[str, Any]:
        landed = [s for s in result.servers if not s.error]
        placed = sum(1 for s in landed if not s.misplaced)
        misplaced: dict[str, int] = {}
        for s in landed:
            if s.misplaced:
                misplaced[s.flavor] = misplaced.get(s.flavor, 0) + 1
        refused = sum(1 for s in result.servers if s.quota)
        by_model: dict[str, list[float]] = {}
        busy_hosts = set()
        for gpu in self.gpus.values():
            entry = by_model.setdefault(gpu.model or '-', [0, 0.0])
            entry[0] += 1
            entry[1] += gpu.used_units()
            if any(gpu.used.values()):
                busy_hosts.add(gpu.host.name)
        gpu_hosts = {g.host.name for g in self.gpus.values()}
        busy_hosts |= {h.name for h in self.hosts.values()
                       if h.used['instances']}
        return {
            'servers_placed': placed,
            'servers_misplaced': len(landed) - placed,
            'misplaced_by_flavor': dict(sorted(misplaced.items())),
            'servers_failed': len(result.servers) - len(landed) - refused,
            'servers_refused_by_quota': refused,
            'servers_deleted': result.deleted,
            'hosts': len(self.hosts), 'gpus': len(self.gpus),
            # every allocation, misplaced servers' included
            'gpu_allocation_pct': self.allocation_pct,
            'gpu_allocation_pct_without_misplaced':
                self.placed_allocation_pct,
            'arrived_pct': self.arrived_pct,
            'first_gpu_failure': self.first_failure,
            'allocation_at': allocation_at(result.curve),
            'fragmentation_pct': self.fragmentation_pct(),
            'fully_free_gpu_hosts': len(gpu_hosts - busy_hosts),
            'hosts_missing_state': len(result.missing_state),
            'usage_by_model': {
                model: {'gpus': n, 'allocation_pct': _pct(units, n)}
                for model, (n, units) in sorted(by_model.items())},
            **self._topology(landed, result),
        }

    def _topology(self, landed, result) -> dict[str, int]:
        """Multi-GPU servers, and how many are split.

        Their GPUs not in one NVLink domain, or on several NUMA nodes, as
        the host's agent reported its GPUs (design doc: Topology).
        """
        multi = split_link = split_numa = 0
        needs = [self.needs.get(s.flavor) for s in result.servers
                 if not s.quota]
        arrived = sum(1 for n in needs if n is not None and n.amount >= 2)
        for server in landed:
            if len(server.gpus) < 2:
                continue
            multi += 1
            host = self.hosts.get(server.host)
            reported = {g['pci_address']: g for g in (
                (host.payload or {}).get('gpus') or [] if host else [])}
            gpus = [reported.get(a, {}) for a in server.gpus]
            domains = {g.get('link_domain') for g in gpus}
            if len(domains) > 1 or None in domains:
                split_link += 1
            if len({g.get('numa_node') for g in gpus}) > 1:
                split_numa += 1
        return {'multi_gpu_servers': multi,
                # servers whose flavor asks two or more GPUs (instances)
                'multi_gpu_arrived': arrived,
                'multi_gpu_not_in_one_link_domain': split_link,
                'multi_gpu_across_numa_nodes': split_numa}
