"""GpuPackingWeigher: free GPU capacity after this request."""
from gpu_nova_ext.scheduler import base


class GpuPackingWeigher(base.GpuWeigher):
    """Binpack (or spread) GPU servers over hosts.

    Raw value: the host's free GPU capacity (in GPU equivalents: a
    whole free GPU is 1, a vGPU-capable GPU with 3 of 8 instances free is
    0.375; unhealthy GPUs count 0) minus what the claimed candidate takes.
    A passthrough GPU counts free when the payload marks it unassigned,
    or (no such mark) when one of the host's allocation candidates uses
    it: Placement offers candidates from free providers only.

    ``[gpu_weights] packing_weight_multiplier`` (aggregate metadata of the
    same name overrides it): negative binpacks (fills hosts already in
    use, keeping whole hosts free for large requests), positive spreads.
    """

    OPTION = 'packing_weight_multiplier'

    def value(self, record, gpus, host_state, ctx):
        if record is None:
            return None
        free = record.free_units
        if gpus:
            cands = host_state.allocation_candidates
            if record.passthrough_unknown:
                # Placement offers candidates only from free providers:
                # a passthrough GPU in no candidate is in use (or failed
                # this request's filters)
                offered = set()
                for cand in cands:
                    offered.update(cand['allocations'])
                for gpu in record.passthrough_unknown:
                    if offered.isdisjoint(gpu.provider_uuids):
                        free -= gpu.free_units
            allocations = cands[0]['allocations']
            for gpu in gpus:
                # what the claim takes from this GPU: its instances there
                taken = 0.0
                for rp in gpu.provider_uuids:
                    alloc = allocations.get(rp)
                    if alloc is not None:
                        taken += gpu.unit_per_instance * max(
                            alloc['resources'].values())
                free -= taken if taken < gpu.free_units else gpu.free_units
        return free
