# SPDX-License-Identifier: Apache-2.0

"""Flavor extra specs of a GPU flavor: Nova's keys and ours.

:func:`extra_specs` is pure: it turns what the operator asks for (model,
count, mode, vGPU type, ...) into the extra specs Nova and gpu-nova-ext's
filters read.  The resource request is Nova's own:

* mdev vGPU (``vgpu``, ``mdev`` backend, MIG-backed types too):
  ``resources:CUSTOM_VGPU_<MODEL>=<count>``, the per-model class
  ``gpu-nova-ext nova-conf`` gives the type (``[mdev_<type>] mdev_class``),
  or ``resources:VGPU=<count>`` with ``vgpu_class='vgpu'`` for hosts that
  keep Nova's default class;
* vendor-specific VFIO vGPU (``vgpu``, ``vfio`` backend):
  ``pci_passthrough:alias=vgpu-<type>:<count>`` (the alias that
  ``gpu-nova-ext nova-conf`` writes for the type);
* passthrough: ``pci_passthrough:alias=gpu-<model>:<count>``, plus
  ``resources:CUSTOM_GPU_<MODEL>=<count>`` when the agent's ``inventory``
  mode counts the GPUs instead of Nova's PCI-in-Placement.

Required traits (``trait:CUSTOM_GPU_...=required``) let Placement prune
hosts before the scheduler runs; the ``gpu:`` keys refine the choice in
the scheduler (design doc: Flavor extra specs).

Every GPU flavor thus draws one per-model (or, vendor VFIO, per-type)
resource class, which is what unified limits count (:func:`quota_class`).

The ``gpu:`` keys are the registry's
(:data:`gpu_nova_ext.scheduler.request.KEYS`): one
:class:`GpuFlavorRequest` field (and one ``flavor create`` option) per
key, named after it, each value checked by the scheduler's own parser, so
the CLI accepts exactly what nova-api and the filters accept.
"""
import dataclasses
import re

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.operator import quota
from gpu_nova_ext.scheduler import request

# what only a flavor has (no gpu: key): how its GPUs are requested
VGPU_BACKENDS = ('mdev', 'vfio')
PCI_ACCOUNTING = ('placement', 'inventory')
VGPU_CLASSES = nova_conf.VGPU_CLASSES
# how flavor create writes a value it accepts in another spelling
_SPELLING = {'gpu:vendor': str.lower,
             'gpu:memory_min': lambda value: re.sub(r'\s+', '', value)}


def attribute(key: request.Key) -> str:
    """``gpu:memory_min`` -> ``memory_min``.

    The :class:`GpuFlavorRequest` field that sets the key, and (dashed)
    the ``openstack gpu flavor create`` option: ``--memory-min``.
    """
    return key.name[len(request.PREFIX):]


@dataclasses.dataclass
class GpuFlavorRequest:
    """What the operator asks of a GPU flavor."""

    model: str
    count: int = 1
    mode: str = 'vgpu'
    vgpu_type: str | None = None
    vgpu_backend: str = 'mdev'
    memory_min: str | None = None
    vendor: str | None = None
    mig: bool = False
    exact_model: bool = False
    alias: str | None = None
    pci_accounting: str = 'placement'
    vgpu_class: str = 'model'
    cuda_cc_min: str | None = None
    driver_min: str | None = None
    health: str | None = None
    intra_host_policy: str | None = None
    power_profile: str | None = None
    topology: str | None = None


def _bad(what: str, value, allowed: str):
    return exception.GpuNovaExtException(
        'Invalid %s %r: %s.' % (what, value, allowed))


def gpu_extra_specs(extra_specs: dict) -> dict:
    """The extra specs that ask for GPUs, or none (not a GPU flavor).

    ``openstack gpu flavor list|show`` and the Tempest plugin's GPU
    flavors.
    """
    out = {}
    for key, value in (extra_specs or {}).items():
        if (key.startswith('gpu:') or key == 'pci_passthrough:alias'
                or (key.startswith('resources')
                    and gpu_consumers.is_gpu_class(key.partition(':')[2]))
                or key.startswith('trait:CUSTOM_GPU_')):
            out[key] = value
    return out


def _gpu_specs(req: GpuFlavorRequest) -> dict[str, str]:
    """The ``gpu:`` keys of the flavor, each checked by the request parser.

    ``--model`` is one model, written normalized.
    """
    specs = {}
    for key in request.KEYS.values():
        value = getattr(req, attribute(key))
        if value is None:
            continue
        value = _SPELLING.get(key.name, str)(value)
        option = '--' + attribute(key).replace('_', '-')
        try:
            parsed = key.parse(value)
        except ValueError as exc:
            if key.name == 'gpu:model':
                raise _bad(option, value, 'give one GPU model such as '
                           'A100_80GB_PCIE or A100 (see gpu-nova-ext '
                           'discover)')
            raise _bad(option, value, 'use %s' % exc)
        if key.name == 'gpu:model':
            if len(parsed) != 1:
                raise _bad(option, value, 'give one GPU model, not a list')
            value = parsed[0]
        specs[key.name] = value
    return specs


def _validate(req: GpuFlavorRequest) -> dict[str, str]:
    """The flavor's ``gpu:`` keys, after every check of the request."""
    if req.count < 1:
        raise _bad('--count', req.count, 'give a positive number of GPUs')
    for option, value, allowed in (
            ('--vgpu-backend', req.vgpu_backend, VGPU_BACKENDS),
            ('--vgpu-class', req.vgpu_class, VGPU_CLASSES),
            ('--pci-accounting', req.pci_accounting, PCI_ACCOUNTING)):
        if value not in allowed:
            raise _bad(option, value, 'use one of %s' % ', '.join(allowed))
    specs = _gpu_specs(req)
    if req.mode == 'passthrough' and (req.vgpu_type or req.mig):
        raise _bad('--mode', req.mode, '--vgpu-type and --mig only apply to '
                   '--mode vgpu')
    if (req.mode == 'vgpu' and req.vgpu_backend == 'vfio'
            and not req.vgpu_type):
        raise _bad('--vgpu-backend', 'vfio', 'vendor VFIO vGPU flavors '
                   'name their type: add --vgpu-type (for example L40S-12Q)')
    return specs


def extra_specs(req: GpuFlavorRequest) -> dict[str, str]:
    """The flavor's extra specs, Nova's and ``gpu:``.  No I/O."""
    gpu = _validate(req)
    model = gpu['gpu:model']
    specs: dict[str, str] = {}
    if req.mode == 'passthrough':
        alias = req.alias or nova_conf.alias_name(model)
        specs['pci_passthrough:alias'] = '%s:%d' % (alias, req.count)
        if req.pci_accounting == 'inventory':
            specs['resources:%s' % naming.model_resource_class(model)] = (
                str(req.count))
    elif req.vgpu_backend == 'vfio':
        alias = req.alias or nova_conf.vgpu_alias_name(req.vgpu_type)
        specs['pci_passthrough:alias'] = '%s:%d' % (alias, req.count)
    else:
        specs['resources:%s' % quota_class(req)] = str(req.count)
    if req.exact_model:
        specs['trait:%s' % naming.model_trait(model)] = 'required'
    if req.mig:
        specs['trait:%s' % naming.MIG_ENABLED_TRAIT] = 'required'
    if req.vendor:
        specs['trait:%s' % naming.vendor_trait(req.vendor)] = 'required'
    specs.update(gpu)
    return specs


def model_kind(req: GpuFlavorRequest) -> str | None:
    """The kind of GPU class ``--model`` names (:mod:`.quota`), or None.

    None: the flavor asks Nova's ``VGPU`` or a vendor VFIO type's class,
    which the model does not name.
    """
    if req.mode == 'passthrough':
        return quota.PASSTHROUGH
    if req.vgpu_backend == 'mdev' and req.vgpu_class == 'model':
        return quota.VGPU
    return None


def resolve_model(req: GpuFlavorRequest,
                  resource_classes: list[str]) -> GpuFlavorRequest:
    """``req`` with a model prefix resolved against Placement's classes.

    When Placement (``resource_classes``: its class names) lacks the
    class the model names, and the model is a prefix (``A100``, at a
    ``_``, as ``gpu:model`` matches) of exactly one GPU model offered in
    the flavor's kind, the flavor is made for that model
    (``A100_80GB_PCIE``); several: refused, naming them.  No match: as
    given (``flavor create`` then refuses a ``resources:`` class no host
    offers).  No I/O.
    """
    kind = model_kind(req)
    if kind is None or quota_class(req) in resource_classes:
        return req
    classes = quota.gpu_classes(resource_classes)
    try:
        matched = quota.resolve_model(req.model, classes, kind)
    except exception.InvalidArgument:
        return req
    models = sorted({c.model for c in matched})
    if len(models) > 1:
        raise exception.InvalidArgument(
            argument='--model', value=req.model,
            reason='%d GPU models offered as %s match it: %s. Give one of '
                   'them' % (len(models), kind, ', '.join(models)))
    return dataclasses.replace(req, model=models[0])


def quota_class(req: GpuFlavorRequest) -> str:
    """The resource class the flavor's GPUs are counted in (quota).

    Passthrough: the alias's ``resource_class`` (Nova merges PCI request
    groups into its quota deltas) or the agent's inventory, both
    ``CUSTOM_GPU_<MODEL>``; vendor VFIO vGPU: ``CUSTOM_GPU_VGPU_<TYPE>``;
    mdev vGPU: ``CUSTOM_VGPU_<MODEL>``, or ``VGPU`` (not per model).
    """
    model = _validate(req)['gpu:model']
    if req.mode == 'passthrough':
        return naming.model_resource_class(model)
    if req.vgpu_backend == 'vfio':
        return nova_conf.vgpu_resource_class(req.vgpu_type)
    if req.vgpu_class == 'vgpu':
        return 'VGPU'
    return nova_conf.mdev_resource_class(model)


@dataclasses.dataclass
class FlavorPlan:
    """A flavor to create: Nova's flavor fields and its extra specs."""

    name: str
    vcpus: int
    ram: int
    disk: int
    is_public: bool
    extra_specs: dict[str, str]
    description: str | None = None
    #: the resource class unified limits count its GPUs in
    quota_class: str | None = None

    def openstack_cli(self) -> str:
        """The same flavor as an ``openstack flavor create`` command."""
        parts = ['openstack flavor create',
                 '--vcpus %d --ram %d --disk %d' % (
                     self.vcpus, self.ram, self.disk),
                 '--public' if self.is_public else '--private']
        if self.description:
            parts.append('--description %s' % _quote(self.description))
        for key, value in self.extra_specs.items():
            parts.append('--property %s=%s' % (key, _quote(value)))
        parts.append(_quote(self.name))
        return ' \\\n    '.join(parts)


def _quote(value: str) -> str:
    if re.match(r'^[A-Za-z0-9_.:,=/+-]+$', value):
        return value
    return "'%s'" % value.replace("'", "'\\''")
