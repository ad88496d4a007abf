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

"""GpuHostAvoidanceWeigher: keep GPU hosts for GPU requests."""
from gpu_nova_ext.scheduler import weighing


class GpuHostAvoidanceWeigher(weighing.GpuWeigher):
    """Weigh hosts with idle GPUs down for requests without GPUs.

    For a request without GPUs only.  Raw value: minus the number of
    idle GPUs (usable, nothing allocated) on the host, so that with the
    positive ``[gpu_weights] avoidance_weight_multiplier`` a CPU-only
    server lands on a host without idle GPUs when it can, instead of using
    up the CPU and RAM that those GPUs' future servers need.  Hosts
    without GPU state count as having none.
    """

    OPTION = 'avoidance_weight_multiplier'
    FOR_GPU_REQUESTS = False

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None or gpus:
            # no GPUs known, or (a "maybe" request) it does use a GPU here
            return 0.0
        return -float(record.idle_gpus)
