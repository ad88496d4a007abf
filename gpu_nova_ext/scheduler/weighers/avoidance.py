"""GpuHostAvoidanceWeigher: keep GPU hosts for GPU requests."""
from gpu_nova_ext.scheduler import weighing


class GpuHostAvoidanceWeigher(weighing.GpuWeigher):
    """Weigh hosts with idle GPUs down for requests without GPUs.

    For a request without GPUs only.  Raw value: minus the number of
    idle GPUs (usable, nothing allocated) on the host, so that with the
    positive ``[gpu_weights] avoidance_weight_multiplier`` a CPU-only
    server lands on a host without idle GPUs when it can, instead of using
    up the CPU and RAM that those GPUs' future servers need.  Hosts
    without GPU state count as having none.
    """

    OPTION = 'avoidance_weight_multiplier'
    FOR_GPU_REQUESTS = False

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None or gpus:
            # no GPUs known, or (a "maybe" request) it does use a GPU here
            return 0.0
        return -float(record.idle_gpus)
