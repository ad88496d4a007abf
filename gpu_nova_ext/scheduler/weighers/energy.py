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

"""GpuEnergyWeigher: prefer GPUs that do the work for less energy."""
from gpu_nova_ext.scheduler.weighers import capability
from gpu_nova_ext.scheduler import weighing


class GpuEnergyWeigher(weighing.GpuWeigher):
    """Weigh hosts by work per watt of the GPU the request would get.

    Raw value: the relative capability of the GPU's model (the
    capability weigher's table and ``[gpu_weights] capability_scores``)
    divided by its power limit in watts (the state's ``power_limit_w``:
    the enforced limit, so a GPU under a ``[power] profiles`` cap counts
    at its cap).  Per unit of work, energy is power over throughput: the
    highest value is the lowest energy cost.  A capped GPU is counted at
    its full capability: GPUs lose little speed under moderate caps, and
    the state carries no measured throughput.  Multiplier
    ``[gpu_weights] energy_weight_multiplier`` (0.0, off, by default).
    """

    OPTION = 'energy_weight_multiplier'

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        overrides, pool = capability.scored_pool(record, gpus, ctx)
        values = []
        for gpu in pool:
            metrics = record.dynamic[gpu.index].get('metrics') or {}
            limit = metrics.get('power_limit_w')
            work = capability.score(gpu.model, overrides) if gpu.model \
                else None
            if limit and work is not None:
                values.append(work / limit)
        if not values:
            return None
        # the claimed GPUs: the least efficient one sets the cost
        return min(values) if gpus else max(values)
