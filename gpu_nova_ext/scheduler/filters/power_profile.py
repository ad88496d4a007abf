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

"""GpuPowerProfileFilter: gpu:power_profile."""
from gpu_nova_ext.scheduler import filtering


class GpuPowerProfileFilter(filtering.GpuFilter):
    """Keep candidates whose GPUs run under the requested power profile.

    The profile of a GPU is what its agent applied (``[power] profiles``;
    the state's ``power_profile``): a GPU whose agent applies none, or
    failed to apply it, has no profile and meets no ``gpu:power_profile``.
    Without the key, this filter passes everything.
    """

    RUN_ON_REBUILD = False

    def constraint(self, req):
        return req.power_profile

    def describe(self, constraint):
        return 'power profile %s' % constraint

    def fact_passes(self, fact, constraint):
        return fact == constraint

    def _fact_groups(self, record):
        # the profile is a fact no other filter judges: read per GPU here
        # rather than as a family of the shared records
        return ((gpu.source.get('power_profile'), gpu.provider_uuids)
                for gpu in record.gpus)
