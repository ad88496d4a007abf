# SPDX-License-Identifier: Apache-2.0

"""What the GPU tests decide without a cloud.  No I/O, no Tempest.

Which flavors are GPU flavors is ``openstack gpu flavor list``'s rule
(:func:`gpu_nova_ext.operator.flavor.gpu_extra_specs`: a ``gpu:`` key, a GPU
resource class, a PCI alias); which resources of an allocation are GPUs
is ``openstack gpu show``'s (:func:`gpu_nova_ext.operator.gpu_consumers.
is_gpu_class`), and a flavor's kind (vGPU or passthrough) is the one
``gpu_consumers.kind_of`` gives its resource classes unless its
``gpu:mode`` says.
"""
from collections.abc import Iterable, Mapping
import dataclasses

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.scheduler import request


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class GpuFlavor:
    """A flavor that asks for GPUs, as the tests use it."""

    id: str
    name: str
    kind: str                       # gpu_consumers.kind_of's vgpu/passthrough
    model: str | None               # gpu:model, when the flavor sets it
    is_public: bool = True
    disk: int = 0                   # root disk, GiB
    ephemeral: int = 0              # ephemeral disk, GiB


def gpu_resources(extra_specs: Mapping[str, str]) -> dict[str, str]:
    """``{class: amount}`` of the GPU ``resources*:`` keys of a flavor."""
    return {key.partition(':')[2]: value
            for key, value in flavor.gpu_extra_specs(dict(extra_specs)).items()
            if key.startswith('resources')}


def is_gpu_flavor(extra_specs: Mapping[str, str]) -> bool:
    return bool(flavor.gpu_extra_specs(dict(extra_specs or {})))


def flavor_kind(extra_specs: Mapping[str, str]) -> str:
    """``vgpu`` or ``passthrough``: ``gpu:mode``, else its classes'."""
    mode = extra_specs.get(request.PREFIX + 'mode')
    if mode in request.MODES:
        return mode
    return gpu_consumers.kind_of(gpu_resources(extra_specs))


def gpu_flavor(flavor: Mapping) -> GpuFlavor:
    """A Nova flavor (``id``, ``name``, ``extra_specs``) as a GpuFlavor."""
    specs = flavor.get('extra_specs') or {}
    return GpuFlavor(
        id=str(flavor['id']), name=flavor['name'],
        kind=flavor_kind(specs), model=specs.get(request.PREFIX + 'model'),
        is_public=flavor.get('os-flavor-access:is_public', True) is not False,
        disk=int(flavor.get('disk') or 0),
        ephemeral=int(flavor.get('OS-FLV-EXT-DATA:ephemeral') or 0))


def _find(flavors: list[Mapping], ref: str) -> Mapping | None:
    return next((f for f in flavors if ref in (str(f['id']), f['name'])),
                None)


def select_flavors(flavors: Iterable[Mapping], wanted: list[str],
                   excluded: list[str]) -> list[GpuFlavor]:
    """The GPU flavors to test, sorted by name.

    :param flavors: the cloud's flavors, each with its ``extra_specs``.
    :param wanted: ``[gpu_nova_ext] flavors`` (empty: every public GPU
        flavor).
    :param excluded: ``[gpu_nova_ext] exclude_flavors``.
    :raises InvalidOption: a wanted flavor is not the cloud's, or asks no
        GPU (one line naming it and the fix).
    """
    flavors = list(flavors)
    if wanted:
        chosen = []
        for ref in wanted:
            found = _find(flavors, ref)
            if found is None:
                raise exception.InvalidOption(
                    group='gpu_nova_ext', option='flavors', value=ref,
                    reason='no flavor of the cloud has that name or ID '
                           '(flavors: %s); fix the name or remove it' % (
                               ', '.join(sorted(f['name'] for f in flavors))
                               or 'none'))
            if not is_gpu_flavor(found.get('extra_specs') or {}):
                raise exception.InvalidOption(
                    group='gpu_nova_ext', option='flavors', value=ref,
                    reason='the flavor asks for no GPU (no gpu: key, GPU '
                           'resource class or PCI alias); remove it')
            chosen.append(found)
    else:
        chosen = [f for f in flavors
                  if is_gpu_flavor(f.get('extra_specs') or {})
                  and gpu_flavor(f).is_public]
    skip = {str(f['id']) for ref in excluded
            if (f := _find(flavors, ref)) is not None}
    return sorted((gpu_flavor(f) for f in chosen if str(f['id']) not in skip),
                  key=lambda f: f.name)


def resize_target(source: GpuFlavor,
                  candidates: Iterable[GpuFlavor]) -> GpuFlavor | None:
    """Another GPU flavor of the same kind and model, or None.

    Only one whose disks are no smaller: Nova refuses a resize that
    shrinks a disk (the root disk is at least the image's minimum, which
    the server's image metadata takes from its flavor).
    """
    same = [f for f in candidates
            if f.id != source.id and f.kind == source.kind
            and f.model == source.model and f.disk >= source.disk
            and f.ephemeral >= source.ephemeral]
    return min(same, key=lambda f: f.name, default=None)


def gpu_allocations(allocations: Mapping[str, Mapping]
                    ) -> dict[str, dict[str, int]]:
    """``{provider: {class: amount}}`` of the GPU resources of a consumer.

    :param allocations: Placement's ``GET /allocations/{consumer}``
        ``allocations`` (provider -> ``{'resources': {...}}``).
    """
    out = {}
    for provider, alloc in allocations.items():
        gpus = {rc: n for rc, n in alloc['resources'].items()
                if gpu_consumers.is_gpu_class(rc)}
        if gpus:
            out[provider] = gpus
    return out


def gpu_address(provider_name: str) -> str | None:
    """The PCI address in a GPU provider's name (``openstack gpu show``)."""
    return audit.provider_address(provider_name)
