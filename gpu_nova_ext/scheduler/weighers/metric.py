# SPDX-License-Identifier: Apache-2.0

"""The weighers of one per-GPU metric: one class, a subclass per metric
(Nova loads weighers by class)."""
from gpu_nova_ext.scheduler import weighing


class GpuMetricWeigher(weighing.GpuWeigher):
    """Weigh hosts by a metric of the claimed GPUs.

    Raw value: the metric of the claimed GPUs, their mean or their least;
    when the claim maps to none, over the host's usable GPUs their mean or
    their best.
    """

    METRIC = ''          # a HostRecord per-GPU tuple
    MEAN = False         # the mean, else the least claimed, best usable
    IDLE = False         # weigh 1 - the metric (a load, not a headroom)

    def value(self, claim, ctx):
        record = claim.record
        if record is None:
            return None
        per_gpu = getattr(record, self.METRIC)
        values = [v for v in (per_gpu[g.index] for g in claim.gpus)
                  if v is not None]
        pick = min
        if not values:
            rank = record.health_rank
            values = [v for i, v in enumerate(per_gpu)
                      if v is not None and rank[i] < 2]
            pick = max
            if not values:
                return None
        value = sum(values) / len(values) if self.MEAN else pick(values)
        return 1.0 - value if self.IDLE else value


class GpuUtilizationWeigher(GpuMetricWeigher):
    """Prefer idle GPUs: 1 - mean utilization (0..1)."""

    OPTION = 'utilization_weight_multiplier'
    METRIC = 'utilization'
    MEAN = True
    IDLE = True


class GpuThermalWeigher(GpuMetricWeigher):
    """Prefer GPUs far from their slowdown temperature (degrees C)."""

    OPTION = 'thermal_weight_multiplier'
    METRIC = 'thermal_headroom'


class GpuPowerWeigher(GpuMetricWeigher):
    """Prefer GPUs far from their power cap (fraction of it unused)."""

    OPTION = 'power_weight_multiplier'
    METRIC = 'power_headroom'
