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

"""GpuFragmentationWeigher: how little a request fragments its host."""
from gpu_nova_ext.scheduler import fragmentation
from gpu_nova_ext.scheduler import weighing


class GpuFragmentationWeigher(weighing.GpuWeigher):
    """Place each request where it least fragments the cloud's GPUs.

    After Fragmentation Gradient Descent (Weng et al., USENIX ATC'23);
    design doc: Fragmentation-aware placement.  A host's fragmentation
    (:func:`gpu_nova_ext.scheduler.fragmentation.fragmentation`) is the
    expected free GPU capacity the expected request mix could not use
    there.  Raw value: the host's fragmentation before the request minus
    after it (the claimed candidate's GPUs taken, the flavor's vCPUs and
    RAM used), so the host where the request fragments least weighs
    most: a request lands on capacity that was stranded already rather
    than break up a host that could take a larger one.

    It weighs GPU requests and requests without GPUs alike (a server
    without GPUs can strand a host's GPUs by taking its CPU or RAM).
    The mix: ``[gpu_scheduler] fragmentation_request_mix``, or learned by
    this process from the GPU requests it weighs.

    ``[gpu_weights] fragmentation_weight_multiplier`` (aggregate metadata
    of the same name overrides it): positive turns it on.
    """

    OPTION = 'fragmentation_weight_multiplier'

    def applies(self, ctx) -> bool:
        return True

    def value(self, record, gpus, allocs, host_state, ctx):
        if record is None:
            return None
        mix = fragmentation.request_mix(ctx, weighing.CONF.gpu_scheduler,
                                        gpus, allocs)
        if not mix:
            return 0.0
        free = fragmentation.gpu_free(record, host_state)
        vcpus, ram = fragmentation.free_cpu_ram(host_state)
        before = fragmentation.fragmentation(free, vcpus, ram, mix)
        if gpus:
            for index, units in fragmentation.taken(gpus, allocs).items():
                free[index] = max(0.0, free[index] - units)
        cpu, mem = fragmentation.flavor_cpu_ram(ctx)
        return before - fragmentation.fragmentation(
            free, vcpus - cpu, ram - mem, mix)
