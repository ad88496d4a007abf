# SPDX-License-Identifier: Apache-2.0

"""GpuReservationWeigher: a project's GPU requests go to its reserved GPUs
and hosts first (design doc: Reservations)."""
from nova.scheduler.filters import utils as filter_utils

from gpu_nova_ext.scheduler import weighing

#: the aggregate metadata keys (any starting with it) Nova's
#: AggregateMultiTenancyIsolation reads: comma-separated project ids
TENANT_KEY = 'filter_tenant_id'


def host_reserved_for(host_state, project: str) -> bool:
    """True when an aggregate of the host keeps it for ``project``."""
    if not host_state.aggregates:
        return False
    metadata = filter_utils.aggregate_metadata_get_by_host(host_state)
    return any(project in values for key, values in metadata.items()
               if key.startswith(TENANT_KEY))


class GpuReservationWeigher(weighing.GpuWeigher):
    """Weigh up what is reserved for the request's project.

    Raw value: 1 when the claim draws from a GPU reserved for the
    request's project (its ``reserved_for``), or an aggregate's
    ``filter_tenant_id`` names the project; else 0.
    """

    OPTION = 'reservation_weight_multiplier'

    def value(self, claim, ctx):
        project = ctx.project_id
        if not project:
            return 0.0
        for gpu in claim.gpus:
            if gpu.reserved_for == project:
                return 1.0
        return 1.0 if host_reserved_for(claim.host_state, project) else 0.0
