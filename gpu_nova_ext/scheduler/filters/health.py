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

"""GpuHealthFilter: gpu:health (default ``healthy``)."""
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler import request
from gpu_nova_ext.state import records


class GpuHealthFilter(filtering.GpuFilter):
    """Keep candidates whose GPUs are healthy enough for the request.

    ``gpu:health`` is ``healthy`` (the default for every GPU request),
    ``degraded_ok`` (degraded GPUs too) or ``any`` (no check, and no need
    for live state).  Unhealthy GPUs are how the agent drains a GPU that
    Nova owns (Nova resets an external ``reserved`` on its providers).
    """

    RUN_ON_REBUILD = False
    FAMILY = records.FAMILY_HEALTH

    def constraint(self, req):
        max_rank = request.HEALTH_MAX_RANK[req.health]
        return None if max_rank >= 2 else max_rank

    def describe(self, constraint):
        return 'health %s' % ('healthy' if constraint == 0
                              else 'healthy or degraded')

    def fact_passes(self, fact, constraint):
        # fact: the GPU's health rank (0 healthy, 1 degraded, 2 unhealthy)
        return fact <= constraint
