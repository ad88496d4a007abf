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

"""GpuMemoryFilter: gpu:memory_min."""
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.state import records


class GpuMemoryFilter(filtering.GpuFilter):
    """Keep candidates whose GPUs have at least ``gpu:memory_min``.

    For a vGPU the memory is the offered type's framebuffer; for a whole
    GPU its physical memory.  A GPU whose memory is unknown (no NVML on
    the host and no vGPU type data) does not pass.
    """

    RUN_ON_REBUILD = False
    FAMILY = records.FAMILY_MEMORY

    def constraint(self, req):
        return req.memory_min_mib

    def describe(self, constraint):
        return 'memory >= %d MiB' % constraint

    def fact_passes(self, fact, constraint):
        # fact: the GPU's memory in MiB (a vGPU's framebuffer) or None
        return fact is not None and fact >= constraint
