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

"""GpuReservationFilter: GPUs reserved for a project (design doc:
Reservations)."""
from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.state import records

# the constraint of a request without a project: no reserved GPU is its
_NO_PROJECT = ''


class GpuReservationFilter(filtering.GpuFilter):
    """Keep the GPUs reserved for another project out of a request.

    ``openstack gpu reservation create --project P --host H --gpu ADDR``
    puts the trait ``CUSTOM_GPU_RESERVED_<P>`` on the GPU's providers; the
    agent reads it with the traits it reconciles each cycle and sends the
    project in the GPU's facts (``reserved_for``).  For every GPU request
    this filter drops the allocation candidates that draw from a GPU
    reserved for a project other than the request's
    (``RequestSpec.project_id``), and the host when none is left.  GPUs
    reserved for the request's own project, and unreserved GPUs, pass;
    GpuCandidateOrderFilter and GpuReservationWeigher make the owner's
    requests prefer its reserved GPUs.

    Hosts without live state follow ``[gpu_scheduler]
    missing_state_policy``, as for every GPU filter.  Whole hosts are
    reserved with Nova's AggregateMultiTenancyIsolation filter instead
    (aggregate metadata ``filter_tenant_id``): that one applies to every
    request, GPU or not.
    """

    RUN_ON_REBUILD = False
    FAMILY = records.FAMILY_RESERVATION

    def constraint(self, req):
        return _NO_PROJECT

    def request_constraint(self, ctx):
        # every GPU request: a request with no constraint may not take
        # another project's GPU either
        return ctx.project_id or _NO_PROJECT

    def describe(self, constraint):
        return 'a GPU not reserved for another project than %s' % (
            constraint or '(no project)')

    def fact_passes(self, fact, constraint):
        # fact: the project the GPU is reserved for, None when it is not
        return fact is None or fact == constraint
