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

"""GpuPowerWeigher: prefer GPUs far from their power cap."""
from gpu_nova_ext.scheduler import weighing


class GpuPowerWeigher(weighing.GpuWeigher):
    """Weigh hosts by the power headroom of their GPUs.

    Raw value: power headroom, the fraction (0..1) of the power limit
    left unused, of the GPU(s) the claimed candidate uses (least headroom
    among them; the host's best usable GPU when the candidate maps to no
    known GPU).  Multiplier ``[gpu_weights] power_weight_multiplier``
    (0.0, off, by default).
    """

    OPTION = 'power_weight_multiplier'

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        per_gpu = record.power_headroom
        if len(gpus) == 1:
            value = per_gpu[gpus[0].index]
            if value is not None:
                return value
        values = [v for v in (per_gpu[g.index] for g in gpus)
                  if v is not None]
        if values:
            return min(values)
        return record.max_power_headroom
