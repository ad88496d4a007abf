# SPDX-License-Identifier: Apache-2.0

"""The servers on a GPU, or on a host's GPUs: consumers of allocations in
Placement.

A host is the root provider Nova names after the hypervisor; its GPUs are
the providers of its tree with GPU inventory (``VGPU``, ``PGPU``, ours
``CUSTOM_GPU_*``, Nova's PCI-in-Placement classes of GPU vendors) and a PCI
address in their name, as :func:`gpu_nova_ext.operator.audit.provider_address`
reads it.  A consumer is a server, or during a move, a migration record
holding the source's allocation.
"""
import dataclasses

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import remediation_policy as policy
from gpu_nova_ext.placement import client as placement_client

VERSION = placement_client.BASE_VERSION


@dataclasses.dataclass(frozen=True)
class GpuConsumer:
    consumer: str               # server (or migration) UUID
    host: str
    gpu: str                    # PCI address
    provider: str               # provider UUID
    resources: tuple            # ((class, amount), ...)

    @property
    def kind(self) -> str:
        return kind_of(dict(self.resources))


def is_gpu_class(rc: str) -> bool:
    return (rc in audit.GPU_RESOURCE_CLASSES or rc.startswith(
        ('CUSTOM_GPU_', audit.MDEV_CLASS_PREFIX)
        + audit.PCI_GPU_CLASS_PREFIXES))


def kind_of(resources: dict) -> str:
    """``vgpu`` for VGPU and the custom vGPU classes, else passthrough."""
    if any(rc == 'VGPU' or rc.startswith((audit.VGPU_CLASS_PREFIX,
                                          audit.MDEV_CLASS_PREFIX))
           for rc in resources):
        return policy.KIND_VGPU
    return policy.KIND_PASSTHROUGH


def host_root(client, host: str) -> str:
    """The root provider UUID of ``host``.

    :raises UnknownHost: Placement has no provider of that name.
    """
    body = client.get('/resource_providers?name=%s' % host, version=VERSION)
    roots = [rp['uuid'] for rp in body.get('resource_providers', [])
             if not rp.get('parent_provider_uuid')]
    if not roots:
        raise exception.UnknownHost(host=host, where='Placement')
    return roots[0]


def gpu_providers(client, host: str, gpu: str | None = None
                  ) -> dict[str, str]:
    """PCI address by provider UUID of the GPU providers of ``host``.

    With ``gpu``, only that GPU's providers (an unknown address gives none).
    """
    root = host_root(client, host)
    body = client.get('/resource_providers?in_tree=%s' % root,
                      version=VERSION)
    out = {}
    for rp in body.get('resource_providers', []):
        if not rp.get('parent_provider_uuid'):
            continue
        address = audit.provider_address(rp['name'])
        if address is None or (gpu is not None and address != gpu.lower()):
            continue
        inv = client.get('/resource_providers/%s/inventories' % rp['uuid'],
                         version=VERSION)['inventories']
        if any(is_gpu_class(rc) for rc in inv):
            out[rp['uuid']] = address
    return out


def consumers(client, host: str, gpu: str | None = None
              ) -> list[GpuConsumer]:
    """The consumers of GPU resources on ``host`` (or its GPU ``gpu``)."""
    out = []
    for provider, address in sorted(gpu_providers(client, host, gpu).items(),
                                    key=lambda kv: kv[1]):
        for consumer, resources in provider_consumers(client, provider):
            out.append(GpuConsumer(
                consumer=consumer, host=host, gpu=address,
                provider=provider, resources=resources))
    return out


def provider_consumers(client, provider: str) -> list[tuple[str, tuple]]:
    """The consumers of one provider's GPU resources.

    :returns: ``[(consumer, ((class, amount), ...)), ...]`` by consumer.
    """
    allocs = client.get('/resource_providers/%s/allocations' % provider,
                        version=VERSION).get('allocations', {})
    out = []
    for consumer, alloc in sorted(allocs.items()):
        resources = {rc: n for rc, n in alloc['resources'].items()
                     if is_gpu_class(rc)}
        if resources:
            out.append((consumer, tuple(sorted(resources.items()))))
    return out
