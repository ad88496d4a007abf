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

"""GpuCapabilityWeigher: relative capability of the GPU model."""
from gpu_nova_ext import naming
from gpu_nova_ext.scheduler import weighing

# Normalized model prefix -> relative capability (dense FP16/BF16 tensor
# throughput, roughly, H100 SXM = 10).  A model matches the longest key it
# equals or starts with at a "_" boundary; [gpu_weights] capability_scores
# overrides and extends it.
CAPABILITY_TABLE = {
    'B200': 22.0, 'B100': 18.0, 'GB200': 25.0,
    'H200': 10.0, 'GH200': 10.0, 'H100': 10.0, 'H100_PCIE': 7.5,
    'H100_NVL': 8.5, 'H800': 10.0, 'H20': 1.5,
    'L40S': 3.7, 'L40': 1.8, 'L20': 1.2, 'L4': 1.2,
    'A100': 3.2, 'A800': 3.2, 'A40': 1.5, 'A30': 1.7, 'A10': 1.3,
    'A16': 0.4, 'A2': 0.2,
    'RTX_6000_ADA': 1.8, 'RTX_A6000': 1.5,
    'V100': 1.3, 'T4': 0.7, 'P100': 0.2, 'P40': 0.1,
    'INSTINCT_MI300X': 13.0, 'INSTINCT_MI250X': 3.8,
    'INSTINCT_MI250': 3.6, 'INSTINCT_MI210': 1.8, 'INSTINCT_MI100': 1.2,
    'MI300X': 13.0, 'MI250X': 3.8, 'MI250': 3.6, 'MI210': 1.8,
    'MI100': 1.2,
    'DATA_CENTER_GPU_MAX_1550': 4.2, 'DATA_CENTER_GPU_MAX_1100': 2.8,
    'DATA_CENTER_GPU_FLEX_170': 0.6, 'DATA_CENTER_GPU_FLEX_140': 0.2,
}

_memo = {'overrides': None, 'table': None, 'scores': {}}


def score(model: str, overrides: dict) -> float | None:
    """Capability of a normalized model; None when no key matches."""
    if _memo['overrides'] != overrides:
        table = dict(CAPABILITY_TABLE)
        for key, value in overrides.items():
            try:
                table[naming.normalize_model(key)] = float(value)
            except (TypeError, ValueError):
                continue
        _memo.update(overrides=dict(overrides), table=table, scores={})
    scores = _memo['scores']
    if model in scores:
        return scores[model]
    best = None
    best_len = -1
    for key, value in _memo['table'].items():
        if (model == key or model.startswith(key + '_')) and \
                len(key) > best_len:
            best, best_len = value, len(key)
    scores[model] = best
    return best


def scored_pool(record, gpus, ctx):
    """The request's capability overrides and the GPUs to score.

    The overrides (``[gpu_weights] capability_scores``) are read once per
    request; the GPUs are the claimed ones, or every GPU of the host that
    is not unhealthy when the request claims none.
    """
    overrides = ctx.extra.get('capability_scores')
    if overrides is None:
        overrides = ctx.extra['capability_scores'] = (
            weighing.CONF.gpu_weights.capability_scores)
    pool = gpus or [
        g for g in record.gpus if record.health_rank[g.index] < 2]
    return overrides, pool


class GpuCapabilityWeigher(weighing.GpuWeigher):
    """Weigh hosts by the capability of their GPU model.

    Raw value: capability score of the model of the GPU the claimed
    candidate uses (of the host's best usable GPU when it maps to no
    known GPU).  Multiplier ``[gpu_weights] capability_weight_multiplier``
    (0.0, off, by default): positive gives requests the best GPUs,
    negative keeps the best GPUs for requests that ask for them by model.
    """

    OPTION = 'capability_weight_multiplier'

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        overrides, pool = scored_pool(record, gpus, ctx)
        values = [s for s in (score(g.model, overrides) for g in pool
                              if g.model) if s is not None]
        return max(values) if values else None
