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

"""GpuThermalWeigher: prefer GPUs far from their slowdown temperature."""
from gpu_nova_ext.scheduler import weighing


class GpuThermalWeigher(weighing.GpuWeigher):
    """Weigh hosts by the thermal headroom of their GPUs.

    Raw value: thermal headroom in degrees C (slowdown threshold minus
    temperature) of the hottest GPU the claimed candidate uses (the
    host's coolest usable GPU when the candidate maps to no known GPU).
    Multiplier ``[gpu_weights] thermal_weight_multiplier``.
    """

    OPTION = 'thermal_weight_multiplier'

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        per_gpu = record.thermal_headroom
        if len(gpus) == 1:
            value = per_gpu[gpus[0].index]
            if value is not None:
                return value
        values = [v for v in (per_gpu[g.index] for g in gpus)
                  if v is not None]
        if values:
            return min(values)
        return record.max_thermal_headroom
