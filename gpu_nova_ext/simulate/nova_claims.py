# SPDX-License-Identifier: Apache-2.0

"""Nova's report client and claim, talking to the embedded Placement.

The Placement query is sent, and the winner claimed, by Nova's
``SchedulerReportClient`` and ``nova.scheduler.utils.claim_resources``.
"""
from typing import Any


def report_client(endpoint: str, token: str = 'admin',
                  mount: Any = None) -> Any:
    """Nova's SchedulerReportClient talking to ``endpoint`` (noauth2).

    ``mount(session)``, when given, connects the keystoneauth session to
    an in-process Placement (:meth:`EmbeddedPlacement.mount`).
    """
    from keystoneauth1 import adapter
    from keystoneauth1 import session
    from keystoneauth1 import token_endpoint
    from nova.scheduler.client import report
    sess = session.Session(auth=token_endpoint.Token(endpoint, token))
    if mount is not None:
        mount(sess)
    # raise_exc=False as nova.utils.get_ksa_adapter makes it: Nova's
    # report client reads the status itself (a 400 for a resource class
    # Placement does not know is "no candidates", not an exception)
    return report.SchedulerReportClient(adapter=adapter.Adapter(
        session=sess, service_type='placement', endpoint_override=endpoint,
        raise_exc=False))


def claim(ctx: Any, client: Any, spec: Any, instance_uuid: str,
          alloc_req: dict, version: str) -> bool:
    """``nova.scheduler.utils.claim_resources``: PUT /allocations."""
    from nova.scheduler import utils
    return utils.claim_resources(ctx, client, spec, instance_uuid,
                                 alloc_req,
                                 allocation_request_version=version)
