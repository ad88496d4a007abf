# SPDX-License-Identifier: Apache-2.0

"""nova.conf's mdev types for a GPU laid out by ``[mig] layouts``.

A MIG-backed NVIDIA vGPU type is named after its GPU-instance profile:
``A100D-3-40C`` runs on a ``3g.40gb`` instance, ``A100D-1-10CME`` on a
``1g.10gb+me`` one (NVIDIA vGPU software documentation, "Virtual GPU
Types for Supported GPUs").  On these boards each SR-IOV VF of the GPU
hosts one vGPU.  So for a layout of ``3g.40gb=1,1g.10gb=2`` the GPU needs
one VF with the 3g type and two with the 1g type: :func:`layout_types`
picks, profile by profile, that many VFs (or mdev parents) that offer the
matching type, and says in a note what it could not match.  No I/O.
"""
import re

from gpu_nova_ext import naming

_MIG_TYPE = re.compile(r'-(\d+)-(\d+)C(ME)?$')


def profile_of_type(name: str | None) -> str | None:
    """``A100D-3-40C`` -> ``3g.40gb``; ``...-1-10CME`` -> ``1g.10gb+me``."""
    bare = naming.vgpu_type_name(name)
    m = _MIG_TYPE.search((bare or '').upper())
    if not m:
        return None
    return '%sg.%sgb%s' % (m.group(1), m.group(2), '+me' if m.group(3)
                           else '')


def type_profile(gpu, t) -> str | None:
    """The MIG profile behind mdev type ``t`` of ``gpu``, or None."""
    names = [t.name] + [nv.name for nv in gpu.vgpu_types if nv.id == t.id]
    for name in names:
        profile = profile_of_type(name)
        if profile:
            return profile
    return None


def layout_types(gpu, counts, notes: list[str]) -> dict[str, list[str]]:
    """mdev type id -> the parents (VFs) to enable it on, for one GPU.

    :param counts: ``(profile name, count)`` pairs of the GPU's layout.
    """
    chosen: dict[str, list[str]] = {}
    used: set[str] = set()
    for profile, count in counts:
        offers = [t for t in gpu.mdev_types
                  if type_profile(gpu, t) == profile]
        if not offers:
            if gpu.mig_enabled:
                notes.append('GPU %s: no vGPU type for MIG profile %s of '
                             'its layout is offered (yet): create the GPU '
                             'instances first (the agent does, [mig] '
                             'layouts) and run nova-conf again.' % (
                                 gpu.pci_address, profile))
            continue
        type_id = offers[0].id
        parents = []
        for t in offers:
            parent = t.parent or gpu.pci_address
            if t.id == type_id and parent not in used and (
                    parent not in parents):
                parents.append(parent)
        taken = parents[:count]
        if len(taken) < count:
            notes.append('GPU %s: MIG profile %s wants %d vGPU(s) of type '
                         '%s, %d parent(s) offer it.' % (
                             gpu.pci_address, profile, count, type_id,
                             len(taken)))
        used.update(taken)
        if taken:
            chosen.setdefault(type_id, []).extend(taken)
    return chosen
