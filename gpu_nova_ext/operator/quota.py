# SPDX-License-Identifier: Apache-2.0

"""GPU quota per model: which resource classes a model means, and the rows
``openstack gpu quota show`` prints.  Pure functions, no I/O.

Nova's unified limits count any resource class as ``class:<RC>`` against
Keystone's limits (registered limits: the cloud-wide default; project
limits: one project's limit).  A GPU is counted per model because every
GPU flavor draws a per-model class (see :mod:`~gpu_nova_ext.operator.flavor`):

==================================  ======================================
resource class                      offered as
==================================  ======================================
``CUSTOM_GPU_<MODEL>``              passthrough (``[pci] device_spec`` /
                                    the agent's ``inventory`` mode)
``CUSTOM_VGPU_<MODEL>``             mdev vGPU (``[mdev_<type>]
                                    mdev_class``)
``CUSTOM_GPU_VGPU_<TYPE>``          vendor VFIO vGPU (per type)
==================================  ======================================

A limit is per class: ``--model A100`` on a cloud with A100_80GB_PCIE
passthrough GPUs and A100_80GB_PCIE vGPUs sets the same limit on each of
the two classes, and each counts on its own (said in the output).
"""
import dataclasses

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import resource_classes

#: Keystone's bounds of a limit; -1 means unlimited
UNLIMITED = -1
MAX_LIMIT = 2147483647

PASSTHROUGH = 'passthrough'
VGPU = 'vgpu'
VGPU_VFIO = 'vgpu-vfio'


@dataclasses.dataclass(frozen=True)
class GpuClass:
    """A GPU resource class and what it offers."""

    resource_class: str
    kind: str
    #: normalized model (passthrough, vGPU) or vGPU type (vendor VFIO)
    model: str

    @property
    def resource_name(self) -> str:
        """The name Nova's unified limits count it under."""
        return 'class:' + self.resource_class

    @property
    def label(self) -> str:
        return '%s (%s)' % (self.model, self.kind)


def classify(resource_class: str) -> GpuClass | None:
    """A Placement resource class -> GpuClass; None when not a GPU's."""
    for prefix, kind in ((resource_classes.VGPU_RC_PREFIX, VGPU_VFIO),
                         (resource_classes.MDEV_RC_PREFIX, VGPU),
                         (naming.TRAIT_PREFIX, PASSTHROUGH)):
        if resource_class.startswith(prefix):
            model = resource_class[len(prefix):]
            return GpuClass(resource_class, kind, model) if model else None
    return None


def gpu_classes(resource_classes) -> list[GpuClass]:
    """The GPU classes among Placement's resource class names, sorted."""
    found = (classify(rc) for rc in resource_classes)
    return sorted((c for c in found if c), key=lambda c: c.resource_class)


def resolve_model(model: str, classes: list[GpuClass],
                  kind: str | None = None) -> list[GpuClass]:
    """The classes ``--model`` names: a full class name, a model, a prefix.

    ``A100`` matches ``A100_80GB_PCIE`` (at a ``_`` boundary, brand words
    optional, as ``gpu:model`` does); an exact model wins over prefixes.
    Raises a one-line error naming the known models when nothing matches.
    """
    candidates = [c for c in classes if kind is None or c.kind == kind]
    wanted = model.strip().upper()
    exact = [c for c in candidates if c.resource_class == wanted]
    if exact:
        return exact
    norm = naming.normalize_model(model)
    exact = [c for c in candidates if c.model == norm]
    if exact:
        return exact
    matched = [c for c in candidates
               if naming.normalized_model_matches(norm, c.model)]
    if matched:
        return matched
    known = ', '.join(c.label for c in candidates) or 'none'
    raise exception.InvalidArgument(
        'No GPU resource class in Placement matches model %r%s; known: %s. '
        'Give one of those, or configure the hosts first (gpu-nova-ext '
        'nova-conf writes the per-model classes).'
        % (model, ' (%s)' % kind if kind else '', known))


def parse_limit(value: str) -> int:
    """``--limit``: an integer from -1 (unlimited) to Keystone's maximum."""
    try:
        limit = int(str(value).strip())
    except ValueError:
        limit = None
    if limit is None or not UNLIMITED <= limit <= MAX_LIMIT:
        raise exception.InvalidArgument(
            'Invalid --limit %r: give a whole number from 0 to %d, or -1 '
            'for unlimited.' % (value, MAX_LIMIT))
    return limit


@dataclasses.dataclass
class QuotaRow:
    """One project's limit and usage of one GPU class."""

    project: str
    gpu: GpuClass
    #: the limit that applies; None when Keystone has none
    limit: int | None
    #: ``project`` (a project limit), ``default`` (the registered limit)
    #: or ``none``
    source: str
    usage: int

    @property
    def over(self) -> int:
        """How far usage is above the limit (0 when within)."""
        if self.limit is None or self.limit == UNLIMITED:
            return 0
        return max(0, self.usage - self.limit)


def row(project: str, gpu: GpuClass, project_limit: int | None,
        default: int | None, usage: int) -> QuotaRow:
    """The limit that applies: the project's, else the default."""
    if project_limit is not None:
        return QuotaRow(project, gpu, project_limit, 'project', usage)
    if default is not None:
        return QuotaRow(project, gpu, default, 'default', usage)
    return QuotaRow(project, gpu, None, 'none', usage)


def limit_text(limit: int | None) -> str:
    if limit is None:
        return '-'
    return 'unlimited' if limit == UNLIMITED else str(limit)


def overage_line(r: QuotaRow) -> str:
    """What a limit below current usage means, in one line."""
    return ('project %s uses %d of %s, %d above its limit %d: Keystone '
            'allows it and running servers are kept, but Nova refuses new '
            'ones until usage plus the request fits it.'
            % (r.project, r.usage, r.gpu.resource_name, r.over, r.limit))
