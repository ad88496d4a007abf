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

"""The weighers of one per-GPU metric: one class, a subclass per metric
(Nova loads weighers by class)."""
from gpu_nova_ext.scheduler import weighing


class GpuMetricWeigher(weighing.GpuWeigher):
    """Weigh hosts by a metric of the claimed GPUs.

    Raw value: the metric of the claimed GPUs, their mean or their least;
    the host's value over its usable GPUs when the claim maps to none.
    """

    METRIC = ''          # a HostRecord per-GPU tuple
    HOST = ''            # the HostRecord value over the usable GPUs
    MEAN = False         # the claimed GPUs' mean, else their least
    IDLE = False         # weigh 1 - the metric (a load, not a headroom)

    def value(self, claim, ctx):
        record = claim.record
        if record is None:
            return None
        per_gpu = getattr(record, self.METRIC)
        values = [v for v in (per_gpu[g.index] for g in claim.gpus)
                  if v is not None]
        if not values:
            value = getattr(record, self.HOST)
        elif self.MEAN:
            value = sum(values) / len(values)
        else:
            value = min(values)
        if value is None:
            return None
        return 1.0 - value if self.IDLE else value


class GpuUtilizationWeigher(GpuMetricWeigher):
    """Prefer idle GPUs: 1 - mean utilization (0..1)."""

    OPTION = 'utilization_weight_multiplier'
    METRIC = 'utilization'
    HOST = 'mean_utilization'
    MEAN = True
    IDLE = True


class GpuThermalWeigher(GpuMetricWeigher):
    """Prefer GPUs far from their slowdown temperature (degrees C)."""

    OPTION = 'thermal_weight_multiplier'
    METRIC = 'thermal_headroom'
    HOST = 'max_thermal_headroom'


class GpuPowerWeigher(GpuMetricWeigher):
    """Prefer GPUs far from their power cap (fraction of it unused)."""

    OPTION = 'power_weight_multiplier'
    METRIC = 'power_headroom'
    HOST = 'max_power_headroom'
