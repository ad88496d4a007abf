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

"""GpuPackingWeigher: free GPU capacity after this request."""
from gpu_nova_ext.scheduler import weighing


class GpuPackingWeigher(weighing.GpuWeigher):
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

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        free = record.free_units
        if not gpus:
            return free
        if record.passthrough_unknown:
            # Placement offers candidates only from free providers: a
            # passthrough GPU in no candidate is in use (or failed this
            # request's filters)
            offered = set()
            for cand in host_state.allocation_candidates:
                offered.update(cand['allocations'])
            for gpu in record.passthrough_unknown:
                if offered.isdisjoint(gpu.provider_uuids):
                    free -= record.free[gpu.index]
        if len(gpus) == 1:
            # what the claim takes from the GPU: its instances there
            gpu = gpus[0]
            taken = gpu.unit_per_instance * max(
                allocs[0]['resources'].values())
            return free - min(taken, record.free[gpu.index])
        # several providers of one GPU (its VFs) may be claimed from
        taken = {}
        for gpu, alloc in zip(gpus, allocs):
            taken[gpu] = taken.get(gpu, 0.0) + gpu.unit_per_instance * max(
                alloc['resources'].values())
        for gpu, units in taken.items():
            free -= min(units, record.free[gpu.index])
        return free
