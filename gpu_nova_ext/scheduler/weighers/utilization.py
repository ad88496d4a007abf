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

"""GpuUtilizationWeigher: prefer idle GPUs."""
from gpu_nova_ext.scheduler import weighing


class GpuUtilizationWeigher(weighing.GpuWeigher):
    """Weigh hosts by how idle their GPUs are.

    Raw value: 1 - mean utilization (0..1) of the GPUs the claimed
    candidate uses (of the host's usable GPUs when the candidate maps to
    no GPU provider the cache knows).  Multiplier
    ``[gpu_weights] utilization_weight_multiplier``.
    """

    OPTION = 'utilization_weight_multiplier'

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        per_gpu = record.utilization
        if len(gpus) == 1:
            value = per_gpu[gpus[0].index]
            if value is not None:
                return 1.0 - value
        values = [v for v in (per_gpu[g.index] for g in gpus)
                  if v is not None]
        if values:
            return 1.0 - sum(values) / len(values)
        if record.mean_utilization is None:
            return None
        return 1.0 - record.mean_utilization
