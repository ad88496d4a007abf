# SPDX-License-Identifier: Apache-2.0

"""GpuCapabilityWeigher and GpuEnergyWeigher: what a GPU's model does,
and for how much energy."""
import functools

from gpu_nova_ext import naming
from gpu_nova_ext.scheduler import weighing

# Normalized model prefix -> relative capability (dense FP16/BF16 tensor
# throughput, roughly, H100 SXM = 10).  A model matches the longest key it
# equals or starts with at a "_" boundary; [gpu_weights] capability_scores
# overrides and extends it.
CAPABILITY_TABLE = {
    'B200': 22.0, 'B100': 18.0, 'GB200': 25.0, 'H200': 10.0, 'GH200': 10.0,
    'H100': 10.0, 'H100_PCIE': 7.5, 'H100_NVL': 8.5, 'H800': 10.0, 'H20': 1.5,
    'L40S': 3.7, 'L40': 1.8, 'L20': 1.2, 'L4': 1.2, 'A100': 3.2, 'A800': 3.2,
    'A40': 1.5, 'A30': 1.7, 'A10': 1.3, 'A16': 0.4, 'A2': 0.2,
    'RTX_6000_ADA': 1.8, 'RTX_A6000': 1.5, 'V100': 1.3, 'T4': 0.7, 'P100': 0.2,
    'P40': 0.1, 'INSTINCT_MI300X': 13.0, 'INSTINCT_MI250X': 3.8,
    'INSTINCT_MI250': 3.6, 'INSTINCT_MI210': 1.8, 'INSTINCT_MI100': 1.2,
    'MI300X': 13.0, 'MI250X': 3.8, 'MI250': 3.6, 'MI210': 1.8, 'MI100': 1.2,
    'DATA_CENTER_GPU_MAX_1550': 4.2, 'DATA_CENTER_GPU_MAX_1100': 2.8,
    'DATA_CENTER_GPU_FLEX_170': 0.6, 'DATA_CENTER_GPU_FLEX_140': 0.2,
}


# per weighed host: an entry per model and overrides (a cloud has few)
@functools.lru_cache(maxsize=256)
def score(model: str, overrides: tuple = ()) -> float | None:
    """Capability of a normalized model; None when no key matches.

    ``overrides``: ``[gpu_weights] capability_scores``, sorted pairs.
    """
    table = dict(CAPABILITY_TABLE)
    for key, value in overrides:
        try:
            table[naming.normalize_model(key)] = float(value)
        except (TypeError, ValueError):
            continue
    matches = [key for key in table
               if model == key or model.startswith(key + '_')]
    return table[max(matches, key=len)] if matches else None


def _scores(claim, ctx) -> list[tuple]:
    """(GPU, score) of the claimed (else the usable) GPUs with a score."""
    if ctx.capability_scores is None:
        ctx.capability_scores = tuple(sorted(
            weighing.CONF.gpu_weights.capability_scores.items()))
    record = claim.record
    pool = claim.gpus or [
        g for g in record.gpus if record.health_rank[g.index] < 2]
    scored = [(g, score(g.model, ctx.capability_scores))
              for g in pool if g.model]
    return [(g, s) for g, s in scored if s is not None]


class GpuCapabilityWeigher(weighing.GpuWeigher):
    """Weigh hosts by the capability of their GPU model.

    Raw value: the claimed GPU's score (else the host's best usable).
    Positive gives requests the best GPUs, negative keeps them free.
    """

    OPTION = 'capability_weight_multiplier'

    def value(self, claim, ctx):
        if claim.record is None:
            return None
        return max((s for _, s in _scores(claim, ctx)), default=None)


class GpuEnergyWeigher(weighing.GpuWeigher):
    """Weigh hosts by work per watt of the GPU the request would get.

    Raw value: the model's capability score over the enforced power limit
    (``power_limit_w``: a capped GPU counts at its cap, at full
    capability).  The least efficient claimed GPU, else the host's best.
    """

    OPTION = 'energy_weight_multiplier'

    def value(self, claim, ctx):
        record = claim.record
        if record is None:
            return None
        values = []
        for gpu, work in _scores(claim, ctx):
            limit = (record.dynamic[gpu.index].get('metrics') or {}).get(
                'power_limit_w')
            if limit:
                values.append(work / limit)
        if not values:
            return None
        return min(values) if claim.gpus else max(values)
