# SPDX-License-Identifier: Apache-2.0

"""The resource classes GPUs are offered in: one per model (per type for
vendor VFIO vGPU), so flavors ask for a model in Placement and unified
limits count each model (``openstack gpu quota``).  Pure, no I/O.
"""
from gpu_nova_ext import naming

VGPU_RC_PREFIX = 'CUSTOM_GPU_VGPU_'
MDEV_RC_PREFIX = 'CUSTOM_VGPU_'
#: ``[mdev_<type>] mdev_class``: one class per GPU model, or Nova's VGPU
VGPU_CLASSES = ('model', 'vgpu')


def pci_resource_class(model: str) -> str:
    """Resource class of a passthrough GPU: ``CUSTOM_GPU_A100_80GB_PCIE``.

    The same class the agent's ``inventory`` mode uses for its own
    providers, so flavors do not depend on which of the two counts a GPU.
    """
    return naming.model_resource_class(model)


def vgpu_resource_class(vgpu_type: str) -> str:
    """Resource class of vendor-VFIO vGPU VFs: ``CUSTOM_GPU_VGPU_L40S_12Q``."""
    return VGPU_RC_PREFIX + naming.normalize_model(vgpu_type)


def mdev_resource_class(model: str) -> str:
    """``mdev_class`` of a model's vGPUs: ``CUSTOM_VGPU_A100_80GB_PCIE``.

    Per model, not per type: a project's quota counts vGPUs of a model
    whatever their size, and flavors of several types of one model share
    the class (``gpu:vgpu_type`` picks the type).
    """
    model = naming.normalize_model(model)
    if not model:
        raise ValueError('no GPU model to name a vGPU resource class')
    return MDEV_RC_PREFIX + model


def mig_resource_class(profile: str) -> str:
    """``mdev_class`` of a MIG-backed vGPU type: ``CUSTOM_VGPU_MIG_2G_20GB``.

    Per GPU-instance profile: a layout mixing sizes on one GPU (e.g.
    ``2g.20gb=3,1g.10gb=1``) offers each size on its own VFs, and only a
    class per size lets Placement give a flavor the size it asks for
    (the per-model class cannot tell them apart).
    """
    name = profile.strip().upper().replace('.', '_').replace('+', '_')
    if not name:
        raise ValueError('no MIG profile to name a vGPU resource class')
    return MDEV_RC_PREFIX + 'MIG_' + name
