# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
"""
import dataclasses
import re

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import nova_conf

MODES = ('vgpu', 'passthrough')
VGPU_BACKENDS = ('mdev', 'vfio')
PCI_ACCOUNTING = ('placement', 'inventory')
VGPU_CLASSES = nova_conf.VGPU_CLASSES
HEALTH = ('healthy', 'degraded_ok', 'any')
POLICIES = ('pack', 'spread', 'coolest', 'least_loaded')

_SIZE_RE = re.compile(r'^\s*(\d+)\s*(MB|MIB|GB|GIB)?\s*$', re.IGNORECASE)
_VERSION_RE = re.compile(r'^\d+(\.\d+)*$')
_CC_RE = re.compile(r'^\d+\.\d+$')


def parse_size_mib(value: str) -> int:
    """``16GB`` / ``16GiB`` -> 16384; ``4096``/``4096MB`` -> 4096."""
    m = _SIZE_RE.match(str(value))
    if not m:
        raise exception.GpuNovaExtException(
            'Invalid GPU memory size %r: give an integer in MiB or one with '
            'a unit MB, MiB, GB or GiB (for example 16GB).' % value)
    number, unit = int(m.group(1)), (m.group(2) or 'MIB').upper()
    return number * 1024 if unit in ('GB', 'GIB') else number


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


def _bad(what: str, value, allowed: str):
    return exception.GpuNovaExtException(
        'Invalid %s %r: %s.' % (what, value, allowed))


def _validate(req: GpuFlavorRequest) -> str:
    model = naming.normalize_model(req.model)
    if not model:
        raise _bad('--model', req.model, 'give a GPU model such as '
                   'A100_80GB_PCIE or A100 (see gpu-nova-ext discover)')
    if req.count < 1:
        raise _bad('--count', req.count, 'give a positive number of GPUs')
    if req.mode not in MODES:
        raise _bad('--mode', req.mode, 'use one of %s' % ', '.join(MODES))
    if req.vgpu_backend not in VGPU_BACKENDS:
        raise _bad('--vgpu-backend', req.vgpu_backend,
                   'use one of %s' % ', '.join(VGPU_BACKENDS))
    if req.vgpu_class not in VGPU_CLASSES:
        raise _bad('--vgpu-class', req.vgpu_class,
                   'use one of %s' % ', '.join(VGPU_CLASSES))
    if req.pci_accounting not in PCI_ACCOUNTING:
        raise _bad('--pci-accounting', req.pci_accounting,
                   'use one of %s' % ', '.join(PCI_ACCOUNTING))
    if req.mode == 'passthrough' and (req.vgpu_type or req.mig):
        raise _bad('--mode', req.mode, '--vgpu-type and --mig only apply to '
                   '--mode vgpu')
    if (req.mode == 'vgpu' and req.vgpu_backend == 'vfio'
            and not req.vgpu_type):
        raise _bad('--vgpu-backend', 'vfio', 'vendor VFIO vGPU flavors '
                   'name their type: add --vgpu-type (for example L40S-12Q)')
    if req.memory_min is not None:
        parse_size_mib(req.memory_min)
    if req.vendor is not None and req.vendor.lower() not in naming.VENDORS:
        raise _bad('--vendor', req.vendor,
                   'use one of %s' % ', '.join(naming.VENDORS))
    if req.cuda_cc_min is not None and not _CC_RE.match(req.cuda_cc_min):
        raise _bad('--cuda-cc-min', req.cuda_cc_min, 'use X.Y, e.g. 8.0')
    if req.driver_min is not None and not _VERSION_RE.match(req.driver_min):
        raise _bad('--driver-min', req.driver_min,
                   'use a dotted version, e.g. 550.54.15')
    if req.health is not None and req.health not in HEALTH:
        raise _bad('--health', req.health, 'use one of %s' % ', '.join(
            HEALTH))
    if (req.intra_host_policy is not None
            and req.intra_host_policy not in POLICIES):
        raise _bad('--intra-host-policy', req.intra_host_policy,
                   'use one of %s' % ', '.join(POLICIES))
    return model


def extra_specs(req: GpuFlavorRequest) -> dict[str, str]:
    """The flavor's extra specs, Nova's and ``gpu:``.  No I/O."""
    model = _validate(req)
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
        specs['gpu:vendor'] = req.vendor.lower()
    specs['gpu:model'] = model
    specs['gpu:mode'] = req.mode
    if req.vgpu_type:
        specs['gpu:vgpu_type'] = req.vgpu_type
    if req.memory_min is not None:
        specs['gpu:memory_min'] = req.memory_min.strip().replace(' ', '')
    if req.cuda_cc_min:
        specs['gpu:cuda_cc_min'] = req.cuda_cc_min
    if req.driver_min:
        specs['gpu:driver_min'] = req.driver_min
    if req.health:
        specs['gpu:health'] = req.health
    if req.intra_host_policy:
        specs['gpu:intra_host_policy'] = req.intra_host_policy
    return specs


def quota_class(req: GpuFlavorRequest) -> str:
    """The resource class the flavor's GPUs are counted in (quota).

    Passthrough: the alias's ``resource_class`` (Nova merges PCI request
    groups into its quota deltas) or the agent's inventory, both
    ``CUSTOM_GPU_<MODEL>``; vendor VFIO vGPU: ``CUSTOM_GPU_VGPU_<TYPE>``;
    mdev vGPU: ``CUSTOM_VGPU_<MODEL>``, or ``VGPU`` (not per model).
    """
    model = _validate(req)
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
