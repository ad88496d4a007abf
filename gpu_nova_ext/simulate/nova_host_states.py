# SPDX-License-Identifier: Apache-2.0

"""HostStates as Nova's HostManager builds them.

Each candidate host is a ``nova.scheduler.host_manager.HostState`` updated
from a ``ComputeNode`` record (as the resource tracker would have saved
it), with its aggregates, and its ``allocation_candidates`` set as
``SchedulerManager._schedule`` sets them.
"""
from typing import Any
import uuid

from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import scenario as scn


def compute_node(host: scn.Host, root_uuid: str, used: dict[str, int],
                 pci_pools: list[dict[str, Any]]) -> Any:
    """The ComputeNode record nova-compute's resource tracker would save.

    ``used`` holds ``vcpus``, ``memory_mb``, ``disk_gb`` and ``instances``
    consumed by the servers booted on the host so far.
    """
    nova_config.load_nova()
    from nova import objects
    from oslo_utils import timeutils
    pools = objects.PciDevicePoolList(objects=[
        objects.PciDevicePool(
            vendor_id=p['vendor_id'], product_id=p['product_id'],
            numa_node=p.get('numa_node'), count=p['count'],
            tags={k: str(v) for k, v in p.get('tags', {}).items()})
        for p in pci_pools])
    return objects.ComputeNode(
        uuid=root_uuid, host=host.name, hypervisor_hostname=host.name,
        memory_mb=host.memory_mb,
        free_ram_mb=host.memory_mb - used.get('memory_mb', 0),
        memory_mb_used=used.get('memory_mb', 0),
        vcpus=host.vcpus, vcpus_used=used.get('vcpus', 0),
        local_gb=host.disk_gb, local_gb_used=used.get('disk_gb', 0),
        free_disk_gb=host.disk_gb - used.get('disk_gb', 0),
        disk_available_least=host.disk_gb - used.get('disk_gb', 0),
        running_vms=used.get('instances', 0),
        updated_at=timeutils.utcnow(with_timezone=True),
        numa_topology=None, pci_device_pools=pools,
        host_ip='192.0.2.1', hypervisor_type='QEMU',
        hypervisor_version=8002000, cpu_info='{}',
        supported_hv_specs=[], current_workload=0,
        stats={'num_instances': str(used.get('instances', 0))},
        metrics='[]',
        cpu_allocation_ratio=host.cpu_allocation_ratio,
        ram_allocation_ratio=host.ram_allocation_ratio,
        disk_allocation_ratio=host.disk_allocation_ratio)


def aggregates(scenario: scn.Scenario) -> dict[str, list]:
    """Host name -> its ``nova.objects.Aggregate`` objects.

    Hosts that name the same aggregate share it (its metadata is merged in
    host order; the first value of a key wins).
    """
    nova_config.load_nova()
    from nova import objects
    by_name: dict[str, Any] = {}
    out: dict[str, list] = {}
    for host in scenario.hosts:
        for name, metadata in host.aggregates.items():
            agg = by_name.get(name)
            if agg is None:
                agg = by_name[name] = objects.Aggregate(
                    id=len(by_name) + 1, name=name,
                    uuid=str(uuid.uuid5(uuid.NAMESPACE_URL, name)),
                    hosts=[], metadata={})
            agg.hosts.append(host.name)
            for key, value in metadata.items():
                agg.metadata.setdefault(key, value)
            out.setdefault(host.name, []).append(agg)
    return out


def host_state(compute: Any, candidates: list[dict],
               host_aggregates: list | None = None) -> Any:
    """A HostState as HostManager builds it, with its candidates.

    ``SchedulerManager._schedule`` gives each host a deep copy of the
    allocation requests that involve its compute node provider.
    """
    from nova.scheduler import host_manager
    from oslo_utils import timeutils
    state = host_manager.HostState(compute.host, compute.hypervisor_hostname,
                                   'simulated-cell')
    service = {'host': compute.host, 'binary': 'nova-compute',
               'topic': 'compute', 'disabled': False,
               'disabled_reason': None, 'forced_down': False,
               'created_at': timeutils.utcnow(), 'updated_at':
               timeutils.utcnow(), 'last_seen_up': timeutils.utcnow(),
               'version': 70, 'uuid': str(uuid.uuid5(uuid.NAMESPACE_DNS,
                                                     compute.host))}
    state.update(compute, service, list(host_aggregates or []), {})
    set_candidates(state, candidates)
    return state


def _json_copy(value: Any) -> Any:
    """``copy.deepcopy`` of JSON data (dicts, lists, scalars), faster.

    Allocation requests are decoded JSON; at a thousand hosts a request
    copies thousands of them.
    """
    if isinstance(value, dict):
        return {k: _json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_copy(v) for v in value]
    return value


def set_candidates(state: Any, candidates: list[dict]) -> None:
    """Ready a kept HostState for a request.

    Its allocation candidates: a deep copy of each, as
    ``SchedulerManager._schedule`` gives them (``copy.deepcopy``; filters
    prune them).  Its
    nova-compute service: heard from just now (nova-compute's heartbeat
    runs every ``[DEFAULT] report_interval``; the simulated computes never
    miss one), as HostManager reads it from the database per request.
    """
    from nova.scheduler import host_manager
    from oslo_utils import timeutils
    state.allocation_candidates = _json_copy(candidates)
    now = timeutils.utcnow()
    service = dict(state.service or {})
    service['updated_at'] = service['last_seen_up'] = now
    state.service = host_manager.ReadOnlyDict(service)
