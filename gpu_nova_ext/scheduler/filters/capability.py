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

"""GpuCapabilityFilter: gpu:cuda_cc_min and gpu:driver_min."""
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.state import records


def _fmt(version):
    return '.'.join(str(p) for p in version) if version else 'any'


class GpuCapabilityFilter(filtering.GpuFilter):
    """Enforce gpu:cuda_cc_min and gpu:driver_min.

    Keep candidates whose GPUs have at least the requested CUDA compute
    capability (``X.Y``) and driver version (compared numerically part by
    part: ``550.54.15`` >= ``550.54.3``).  An unknown value does not pass.
    """

    RUN_ON_REBUILD = False
    FAMILY = records.FAMILY_CAPABILITY

    def constraint(self, req):
        if req.cuda_cc_min is None and req.driver_min is None:
            return None
        return (req.cuda_cc_min, req.driver_min)

    def describe(self, constraint):
        return 'CUDA compute capability >= %s, driver >= %s' % (
            _fmt(constraint[0]), _fmt(constraint[1]))

    def fact_passes(self, fact, constraint):
        cuda_cc, driver = constraint
        gpu_cuda_cc, gpu_driver = fact
        if cuda_cc is not None and (gpu_cuda_cc is None
                                    or gpu_cuda_cc < cuda_cc):
            return False
        if driver is not None and (gpu_driver is None
                                   or gpu_driver < driver):
            return False
        return True
