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

"""GpuModelFilter: gpu:model, gpu:vendor, gpu:mode and gpu:vgpu_type."""
from gpu_nova_ext import naming
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.state import records


class GpuModelFilter(filtering.GpuFilter):
    """Enforce gpu:model, gpu:vendor, gpu:mode and gpu:vgpu_type.

    Keep candidates whose GPUs are of a requested model and vendor,
    offered in the requested mode (``vgpu`` or ``passthrough``) and, for
    ``gpu:vgpu_type``, offering one of the requested mdev types.

    A requested model matches a normalized model equal to it or starting
    with it at a ``_`` boundary: ``A100`` matches ``A100_80GB_PCIE``, not
    ``A1000``; a brand word is optional (``T4`` matches ``TESLA_T4``).
    Unknown ``gpu:`` keys (a flavor older than the validators) make this
    filter reject the request's hosts.
    """

    RUN_ON_REBUILD = False
    FAMILY = records.FAMILY_MODEL

    def constraint(self, req):
        if not (req.models or req.vendor or req.mode or req.vgpu_types):
            return None
        return (req.models, req.vendor, req.mode, req.vgpu_types)

    def describe(self, constraint):
        models, vendor, mode, types = constraint
        return 'model %s, vendor %s, mode %s, vGPU type %s' % (
            ','.join(models) or 'any', vendor or 'any', mode or 'any',
            ','.join(sorted(types)) if types else 'any')

    def fact_passes(self, fact, constraint):
        models, vendor, mode, types = constraint
        gpu_vendor, model, gpu_mode, gpu_types = fact
        if vendor and gpu_vendor != vendor:
            return False
        if models:
            if not model:
                return False
            for req in models:
                if naming.normalized_model_matches(req, model):
                    break
            else:
                return False
        if mode:
            if mode == 'vgpu':
                if gpu_mode not in records.VGPU_MODES:
                    return False
            elif gpu_mode != mode:
                return False
        if types and types.isdisjoint(gpu_types):
            return False
        return True
