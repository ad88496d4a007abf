# SPDX-License-Identifier: Apache-2.0

"""The weighers of a host's free GPU capacity: GpuPackingWeigher,
GpuFragmentationWeigher and GpuTopologyWeigher for GPU requests,
GpuHostAvoidanceWeigher for requests without GPUs."""
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.scheduler import weighing


class GpuPackingWeigher(weighing.GpuWeigher):
    """Binpack (or spread) GPU servers over hosts.

    Raw value: the host's free GPU capacity (GPU equivalents: 3 of 8
    vGPUs free is 0.375; unhealthy GPUs 0) minus what the claim takes.
    Negative multipliers binpack, positive spread.
    """

    OPTION = 'packing_weight_multiplier'

    def value(self, claim, ctx):
        record = claim.record
        if record is None:
            return None
        if not claim.gpus:
            return record.free_units
        free = claim.free()
        return sum(free) - sum(min(units, record.free[index])
                               for index, units in claim.taken().items())


class GpuHostAvoidanceWeigher(weighing.GpuWeigher):
    """Weigh hosts with idle GPUs down for requests without GPUs.

    Raw value: minus the host's idle GPUs, so that a CPU-only server
    leaves the CPU and RAM those GPUs' servers need.
    """

    OPTION = 'avoidance_weight_multiplier'
    FOR_GPU_REQUESTS = False

    def value(self, claim, ctx):
        if claim.record is None or claim.gpus:
            # no GPUs known, or (a "maybe" request) it does use a GPU here
            return 0.0
        return -float(claim.record.idle_gpus)


class GpuFragmentationWeigher(weighing.GpuWeigher):
    """Place each request where it least fragments the cloud's GPUs.

    Design doc: Fragmentation-aware placement.  Raw value: the host's
    fragmentation before the request minus after it (the claim's GPUs,
    the flavor's vCPUs and RAM taken).  Requests without GPUs too: they
    can strand GPUs by taking CPU or RAM.
    """

    OPTION = 'fragmentation_weight_multiplier'

    def applies(self, ctx) -> bool:
        return True

    def value(self, claim, ctx):
        record = claim.record
        if record is None:
            return None
        mix = fragmentation.request_mix(ctx, claim.taken())
        if not mix:
            return 0.0
        free = list(claim.free())     # changed below
        vcpus, ram = fragmentation.free_cpu_ram(claim.host_state)
        domains = record.facts.link_domains
        before = fragmentation.fragmentation(free, vcpus, ram, mix, domains)
        for index, units in claim.taken().items():
            free[index] = max(0.0, free[index] - units)
        return before - fragmentation.fragmentation(
            free, vcpus - ctx.vcpus, ram - ctx.ram_mb, mix, domains)


class GpuTopologyWeigher(weighing.GpuWeigher):
    """Take GPUs from the NVLink domains with the least room first.

    Design doc: Topology.  Raw value: minus the free GPU capacity of the
    link domains the claim draws from, so that small servers use up
    half-used domains and leave whole ones (an HGX board, a free pair) to
    the servers that need them.  Unknown (weighs as the mean) when the
    claimed GPUs have no link domain.
    """

    OPTION = 'topology_weight_multiplier'

    def value(self, claim, ctx):
        record = claim.record
        if record is None or not claim.gpus:
            return None
        domains = {g.link_domain for g in claim.gpus}
        domains.discard(None)
        if not domains:
            return None
        if record.passthrough_unknown:
            # which whole GPUs are free depends on the host's candidates
            free = claim.free()
            return -sum(free[g.index] for g in record.gpus
                        if g.link_domain in domains)
        room = record.domain_free()
        return -sum(room[d] for d in domains)
