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
