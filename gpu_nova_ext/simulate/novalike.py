"""Create Placement providers the way nova-compute (libvirt, Nova 34) does.

The simulator and the functional tests stand in for nova-compute with
these helpers, over the same REST API, with the names, inventories and
traits Nova uses:

* the compute node (root) provider, named after the hypervisor hostname,
  with ``VCPU``/``MEMORY_MB``/``DISK_GB`` inventory and ``COMPUTE_*``
  capability traits (``nova/compute/resource_tracker.py``);
* one libvirt pGPU child per GPU (or per SR-IOV VF) offering vGPUs,
  ``<nodename>_pci_0000_3b_00_0`` with ``VGPU`` (or the configured mdev
  class) inventory and ``OWNER_NOVA``
  (``LibvirtDriver._ensure_pgpu_providers``);
* PCI-in-Placement children, ``<nodename>_0000:3B:00.0`` with
  ``CUSTOM_PCI_<VENDOR>_<PRODUCT>`` (or the device_spec resource class)
  inventory, ``COMPUTE_MANAGED_PCI_DEVICE``, the device_spec traits and
  ``OWNER_NOVA``; VFs count on their parent PF's provider
  (``nova/compute/pci_placement_translator.py``).

Plus :func:`claim`, which writes an instance's allocations as the
conductor does after scheduling.
"""
from collections.abc import Iterable, Mapping
from typing import Any

import os_traits

from gpu_nova_ext import naming
from gpu_nova_ext.placement import client as pclient

# What a libvirt/KVM compute node of Nova 34 reports on its root provider
# (capabilities; HW_CPU_* come from the CPU model and vary per host).
COMPUTE_TRAITS = (
    os_traits.COMPUTE_NODE,
    os_traits.COMPUTE_NET_ATTACH_INTERFACE,
    os_traits.COMPUTE_NET_ATTACH_INTERFACE_WITH_TAG,
    os_traits.COMPUTE_VOLUME_ATTACH_WITH_TAG,
    os_traits.COMPUTE_VOLUME_EXTEND,
    os_traits.COMPUTE_VOLUME_MULTI_ATTACH,
    os_traits.COMPUTE_TRUSTED_CERTS,
    os_traits.COMPUTE_DEVICE_TAGGING,
    os_traits.COMPUTE_IMAGE_TYPE_QCOW2,
    os_traits.COMPUTE_IMAGE_TYPE_RAW,
    os_traits.COMPUTE_RESCUE_BFV,
    os_traits.HW_CPU_X86_AVX2,
)


def _inventory(total: int, reserved: int = 0, ratio: float = 1.0,
               max_unit: int | None = None) -> dict:
    return {'total': total, 'reserved': reserved, 'min_unit': 1,
            'max_unit': max_unit or total, 'step_size': 1,
            'allocation_ratio': ratio}


def _set_traits(client, uuid: str, traits: Iterable[str]) -> None:
    traits = sorted(set(traits))
    for trait in traits:
        if os_traits.is_custom(trait):
            client.put('/traits/%s' % trait, version=pclient.TRAITS_VERSION)

    def build():
        gen = client.get('/resource_providers/%s' % uuid,
                         version=pclient.PROVIDERS_VERSION)['generation']
        return {'traits': traits, 'resource_provider_generation': gen}

    client.write_generation_checked(
        'PUT', '/resource_providers/%s/traits' % uuid, build,
        version=pclient.TRAITS_VERSION)


def _set_inventory(client, uuid: str, inventories: Mapping[str, dict]):
    for rc in inventories:
        if rc.startswith('CUSTOM_'):
            client.put('/resource_classes/%s' % rc,
                       version=pclient.RESOURCE_CLASS_VERSION)

    def build():
        gen = client.get('/resource_providers/%s' % uuid,
                         version=pclient.PROVIDERS_VERSION)['generation']
        return {'inventories': dict(inventories),
                'resource_provider_generation': gen}

    client.write_generation_checked(
        'PUT', '/resource_providers/%s/inventories' % uuid, build,
        version=pclient.INVENTORY_VERSION)


def _create(client, name: str, parent_uuid: str | None = None,
            uuid: str | None = None) -> str:
    body: dict[str, Any] = {'name': name}
    if parent_uuid:
        body['parent_provider_uuid'] = parent_uuid
    if uuid:
        body['uuid'] = uuid
    return client.post('/resource_providers', body,
                       version=pclient.PROVIDERS_VERSION)['uuid']


def create_compute_node(client: pclient.PlacementClient, nodename: str, *,
                        uuid: str | None = None, vcpus: int = 64,
                        memory_mb: int = 262144, disk_gb: int = 2000,
                        cpu_allocation_ratio: float = 4.0,
                        reserved_host_memory_mb: int = 512,
                        traits: Iterable[str] = COMPUTE_TRAITS) -> str:
    """The root provider of a compute node; returns its UUID."""
    uuid = _create(client, nodename, uuid=uuid)
    _set_inventory(client, uuid, {
        'VCPU': _inventory(vcpus, ratio=cpu_allocation_ratio),
        'MEMORY_MB': _inventory(memory_mb, reserved=reserved_host_memory_mb),
        'DISK_GB': _inventory(disk_gb),
    })
    _set_traits(client, uuid, traits)
    return uuid


def create_pgpu_provider(client: pclient.PlacementClient, nodename: str,
                         root_uuid: str, pci_address: str, total: int, *,
                         resource_class: str = 'VGPU') -> str:
    """A libvirt pGPU provider (GPU or VF offering ``total`` mdevs)."""
    name = naming.pgpu_provider_name(nodename, pci_address)
    uuid = _create(client, name, root_uuid)
    _set_inventory(client, uuid, {resource_class: _inventory(total)})
    _set_traits(client, uuid, [os_traits.OWNER_NOVA])
    return uuid


def pci_resource_class(vendor_id: str, product_id: str) -> str:
    """Nova's default class for a PCI device without a resource_class tag."""
    return ('CUSTOM_PCI_%s_%s' % (vendor_id, product_id)).upper()


def create_pci_provider(client: pclient.PlacementClient, nodename: str,
                        root_uuid: str, pci_address: str, *,
                        vendor_id: str = '10de', product_id: str = '20b5',
                        total: int = 1, resource_class: str | None = None,
                        traits: Iterable[str] = ()) -> str:
    """A PCI-in-Placement provider of a PF (or of the VFs of a PF)."""
    name = naming.pci_provider_name(nodename, pci_address)
    uuid = _create(client, name, root_uuid)
    rc = resource_class or pci_resource_class(vendor_id, product_id)
    _set_inventory(client, uuid, {rc: _inventory(total)})
    update_pci_provider_traits(client, uuid, traits)
    return uuid


def update_pci_provider_traits(client: pclient.PlacementClient, uuid: str,
                               traits: Iterable[str] = ()) -> None:
    """Do what nova-compute does to a PCI provider at each update.

    It replaces the traits with the device_spec ones: external traits are
    lost.
    """
    _set_traits(client, uuid, set(traits) | {
        os_traits.COMPUTE_MANAGED_PCI_DEVICE, os_traits.OWNER_NOVA})


def claim(client: pclient.PlacementClient, consumer_uuid: str,
          allocations: Mapping[str, Mapping[str, int]], *,
          project_id: str = 'project', user_id: str = 'user') -> None:
    """Allocate to a new consumer, as the conductor does for an instance.

    ``allocations`` is ``{provider_uuid: {resource_class: amount}}``.
    """
    client.put('/allocations/%s' % consumer_uuid, {
        'allocations': {rp: {'resources': dict(res)}
                        for rp, res in allocations.items()},
        'consumer_generation': None,
        'project_id': project_id, 'user_id': user_id,
    }, version=pclient.ALLOCATIONS_VERSION)


def unclaim(client: pclient.PlacementClient, consumer_uuid: str) -> None:
    """Remove all allocations of a consumer (instance deleted)."""
    client.delete('/allocations/%s' % consumer_uuid,
                  version=pclient.ALLOCATIONS_VERSION)
