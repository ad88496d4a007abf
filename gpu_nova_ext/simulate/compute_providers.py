# SPDX-License-Identifier: Apache-2.0

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

``client`` is a :class:`~gpu_nova_ext.placement.client.PlacementClient`
(the REST API, as nova-compute) or an :class:`ObjectWriter`: the same
providers written through Placement's own objects (what its REST handlers
call), without HTTP, JSON and schema checks per write, for the simulator's
set-up of thousands of hosts.
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


class ObjectWriter:
    """Write providers with Placement's objects, in this process.

    :param conf: the embedded Placement's configuration (its objects read
        it from the request context).
    """

    def __init__(self, conf):
        from placement import context as placement_context
        from placement.objects import resource_class
        from placement.objects import trait
        self.ctx = placement_context.RequestContext(config=conf)
        trait.ensure_sync(self.ctx)
        resource_class.ensure_sync(self.ctx)
        self._traits: dict[str, Any] = {}
        self._classes: set[str] = set()

    def provider(self, name: str, parent_uuid: str | None,
                 inventories: Mapping[str, dict], traits: Iterable[str],
                 uuid: str | None = None) -> str:
        """Create a provider with its inventory and traits; its UUID."""
        import uuid as uuidlib

        from placement.objects import inventory
        from placement.objects import resource_provider
        rp = resource_provider.ResourceProvider(
            self.ctx, uuid=uuid or str(uuidlib.uuid4()), name=name,
            parent_provider_uuid=parent_uuid)
        rp.create()
        for rc in inventories:
            self._resource_class(rc)
        rp.set_inventory([inventory.Inventory(
            resource_provider=rp, resource_class=rc, **inv)
            for rc, inv in inventories.items()])
        rp.set_traits([self._trait(t) for t in sorted(set(traits))])
        return rp.uuid

    def resource_class(self, name: str) -> None:
        """Create a custom class (``openstack resource class create``)."""
        self._resource_class(name)

    def _resource_class(self, name: str) -> None:
        from placement import exception
        from placement.objects import resource_class
        if name in self._classes or not name.startswith('CUSTOM_'):
            return
        try:
            resource_class.ResourceClass(self.ctx, name=name).create()
        except exception.ResourceClassExists:
            pass
        self._classes.add(name)

    def _trait(self, name: str):
        from placement import exception
        from placement.objects import trait
        if name not in self._traits:
            if os_traits.is_custom(name):
                try:
                    trait.Trait(self.ctx, name=name).create()
                except exception.TraitExists:
                    pass
            self._traits[name] = trait.Trait.get_by_name(self.ctx, name)
        return self._traits[name]


def _provider(client, name: str, parent_uuid: str | None,
              inventories: Mapping[str, dict], traits: Iterable[str],
              uuid: str | None = None) -> str:
    if isinstance(client, ObjectWriter):
        return client.provider(name, parent_uuid, inventories, traits, uuid)
    uuid = _create(client, name, parent_uuid, uuid=uuid)
    _set_inventory(client, uuid, inventories)
    _set_traits(client, uuid, traits)
    return uuid


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
    return _provider(client, nodename, None, {
        'VCPU': _inventory(vcpus, ratio=cpu_allocation_ratio),
        'MEMORY_MB': _inventory(memory_mb, reserved=reserved_host_memory_mb),
        'DISK_GB': _inventory(disk_gb),
    }, traits, uuid=uuid)


def create_pgpu_provider(client: pclient.PlacementClient, nodename: str,
                         root_uuid: str, pci_address: str, total: int, *,
                         resource_class: str = 'VGPU') -> str:
    """A libvirt pGPU provider (GPU or VF offering ``total`` mdevs)."""
    name = naming.pgpu_provider_name(nodename, pci_address)
    return _provider(client, name, root_uuid,
                     {resource_class: _inventory(total)},
                     [os_traits.OWNER_NOVA])


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
    rc = resource_class or pci_resource_class(vendor_id, product_id)
    return _provider(client, name, root_uuid, {rc: _inventory(total)},
                     _pci_traits(traits))


def update_pci_provider_traits(client: pclient.PlacementClient, uuid: str,
                               traits: Iterable[str] = ()) -> None:
    """Do what nova-compute does to a PCI provider at each update.

    It replaces the traits with the device_spec ones: external traits are
    lost.
    """
    _set_traits(client, uuid, _pci_traits(traits))


def _pci_traits(traits: Iterable[str]) -> set[str]:
    return set(traits) | {os_traits.COMPUTE_MANAGED_PCI_DEVICE,
                          os_traits.OWNER_NOVA}


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
