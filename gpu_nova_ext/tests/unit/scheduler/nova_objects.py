# SPDX-License-Identifier: Apache-2.0

"""Real Nova scheduler objects for the plugin tests and tools/bench-scheduler.

Builds nova.scheduler.host_manager.HostState from real ComputeNode and
service records (as HostManager does), RequestSpec/Flavor objects,
Placement-shaped allocation candidates, and GPU state payloads of the
design doc: State protocol shape.  No mocks: the objects go through Nova's own
filter and weight handlers.
"""
import datetime
import uuid

from nova import objects
from nova.scheduler import filters as nova_filters
from nova.scheduler import host_manager
from nova.scheduler import weights as nova_weights

objects.register_all()

_NS = uuid.UUID('6f1c2a60-7a43-4bb1-9d1e-3c2f5d0f6a10')


def rp_uuid(*parts: str) -> str:
    """A stable provider UUID from names."""
    return str(uuid.uuid5(_NS, '/'.join(parts)))


def pci(i: int) -> str:
    return '0000:%02x:00.0' % (0x10 + i)


def gpu_state(host: str, i: int, model: str = 'A100_80GB_PCIE',
              vendor: str = 'nvidia', memory_mib: int = 81920,
              mode: str = 'vgpu', health: str = 'healthy',
              utilization: float | None = 10.0,
              temperature: float | None = 40.0, power: float | None = 70.0,
              available: int = 8, max_instances: int = 8,
              framebuffer_mib: int | None = 10240,
              driver: str | None = '550.54.15',
              cuda_cc: str | None = '8.0', assigned: bool | None = None,
              vgpu_type: str = 'nvidia-471',
              vgpu_name: str = 'A100D-10C',
              reserved_for: str | None = None) -> dict:
    """One GPU object of a state payload; provider = rp_uuid(host, pci)."""
    address = pci(i)
    gpu = {
        'pci_address': address, 'vfs': [],
        'provider_uuids': [rp_uuid(host, address)],
        'vendor': vendor, 'model': model, 'memory_mib': memory_mib,
        'uuid': 'GPU-%s' % rp_uuid(host, address, 'gpu'), 'numa_node': 0,
        'mode': mode,
        'offered_vgpu_type': vgpu_type if mode == 'vgpu' else None,
        'driver_version': driver, 'cuda_cc': cuda_cc,
        'vgpu_types': ([{'id': vgpu_type, 'name': vgpu_name,
                         'framebuffer_mib': framebuffer_mib,
                         'available': available, 'max': max_instances}]
                       if mode == 'vgpu' else []),
        'mig': {'capable': True, 'enabled': False},
        'health': {'state': health,
                   'reasons': [] if health == 'healthy' else ['test']},
        'metrics': {'utilization_pct': utilization, 'memory_used_mib': 2048,
                    'temperature_c': temperature,
                    'slowdown_temperature_c': 87, 'power_w': power,
                    'power_limit_w': 300},
    }
    if assigned is not None:
        gpu['assigned'] = assigned
    if reserved_for is not None:
        gpu['reserved_for'] = reserved_for
    return gpu


def payload(host: str, gpus: list[dict], generated_at: float = 1000.0,
            nodename: str | None = None) -> dict:
    return {'version': '1.0', 'host': host, 'nodename': nodename or host,
            'generated_at': generated_at, 'agent_mode': 'annotate',
            'root_provider_uuid': rp_uuid(host), 'gpus': gpus}


def candidates(host: str, gpu_indexes, rc: str = 'VGPU',
               amount: int = 1) -> list[dict]:
    """One allocation candidate per GPU, as Placement returns them."""
    root = rp_uuid(host)
    out = []
    for i in gpu_indexes:
        gpu_rp = rp_uuid(host, pci(i))
        out.append({
            'allocations': {
                root: {'resources': {'VCPU': 4, 'MEMORY_MB': 8192,
                                     'DISK_GB': 40}},
                gpu_rp: {'resources': {rc: amount}}},
            'mappings': {'': [root, gpu_rp]}})
    return out


def plain_candidates(host: str, count: int = 1) -> list[dict]:
    root = rp_uuid(host)
    return [{'allocations': {root: {'resources': {
        'VCPU': 4, 'MEMORY_MB': 8192, 'DISK_GB': 40}}},
        'mappings': {'': [root]}} for _ in range(count)]


def host_state(host: str, free_ram_mb: int = 262144, vcpus: int = 64,
               vcpus_used: int = 0, free_disk_gb: int = 2000,
               aggregates=None, allocation_candidates=None,
               cell_uuid: str | None = None) -> host_manager.HostState:
    """A HostState updated from a real ComputeNode and service record."""
    now = datetime.datetime.now(datetime.timezone.utc)
    node = objects.ComputeNode(
        uuid=rp_uuid(host), host=host, hypervisor_hostname=host,
        memory_mb=free_ram_mb + 1024, memory_mb_used=1024,
        free_ram_mb=free_ram_mb, local_gb=free_disk_gb + 10,
        local_gb_used=10, free_disk_gb=free_disk_gb,
        disk_available_least=free_disk_gb, vcpus=vcpus,
        vcpus_used=vcpus_used, updated_at=now, host_ip='10.0.0.1',
        hypervisor_type='QEMU', hypervisor_version=8002000,
        cpu_info='{}', supported_hv_specs=[], numa_topology=None,
        pci_device_pools=objects.PciDevicePoolList(objects=[]),
        stats={'num_instances': '0', 'io_workload': '0',
               'failed_builds': '0'},
        metrics='[]', cpu_allocation_ratio=4.0, ram_allocation_ratio=1.0,
        disk_allocation_ratio=1.0, current_workload=0, running_vms=0)
    state = host_manager.HostState(host, host,
                                   cell_uuid or rp_uuid('cell1'))
    service = {'host': host, 'binary': 'nova-compute', 'disabled': False,
               'forced_down': False, 'created_at': now, 'updated_at': now,
               'last_seen_up': now}
    state.update(compute=node, service=service, aggregates=aggregates or [],
                 inst_dict={})
    state.allocation_candidates = list(allocation_candidates or [])
    return state


def aggregate(name: str, hosts: list[str], metadata: dict):
    return objects.Aggregate(id=abs(hash(name)) % 100000, name=name,
                             hosts=hosts, metadata=metadata)


def request_spec(extra_specs: dict | None = None, vcpus: int = 4,
                 memory_mb: int = 8192, disk_gb: int = 40,
                 rebuild: bool = False,
                 project_id: str = 'p') -> objects.RequestSpec:
    flavor = objects.Flavor(
        id=1, flavorid='f1', name='f1', vcpus=vcpus, memory_mb=memory_mb,
        root_gb=disk_gb, ephemeral_gb=0, swap=0, rxtx_factor=1.0,
        vcpu_weight=0, disabled=False, is_public=True,
        extra_specs=dict(extra_specs or {}))
    hints = {'_nova_check_type': ['rebuild']} if rebuild else {}
    return objects.RequestSpec(
        instance_uuid=str(uuid.uuid4()), project_id=project_id, user_id='u',
        flavor=flavor, num_instances=1, scheduler_hints=hints,
        image=objects.ImageMeta.from_dict({'properties': {}}),
        instance_group=None, pci_requests=objects.InstancePCIRequests(
            requests=[]),
        requested_resources=[], is_bfv=False, ignore_hosts=None,
        force_hosts=None, force_nodes=None, requested_destination=None,
        availability_zone=None, numa_topology=None, retry=None,
        limits=objects.SchedulerLimits(),
        security_groups=objects.SecurityGroupList(objects=[]))


def filter_handler() -> nova_filters.HostFilterHandler:
    return nova_filters.HostFilterHandler()


def weight_handler() -> nova_weights.HostWeightHandler:
    return nova_weights.HostWeightHandler()


def run_filters(filter_objs, hosts, spec, index=0):
    return list(filter_handler().get_filtered_objects(filter_objs, hosts,
                                                      spec, index) or [])


def weigh(weigher_objs, hosts, spec):
    return weight_handler().get_weighed_objects(weigher_objs, hosts, spec)
