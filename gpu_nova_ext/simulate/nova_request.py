# SPDX-License-Identifier: Apache-2.0

"""A boot's RequestSpec and Placement query, with Nova's own code.

The ``RequestSpec`` is built as nova-api builds it
(``RequestSpec.from_components`` with the flavor's PCI requests); Nova's
request filters (``nova.scheduler.request_filter``) that need no
database run; the Placement query comes from
``nova.scheduler.utils.resources_from_request_spec``.
"""
from typing import Any

import os_traits

from gpu_nova_ext.simulate import identity
from gpu_nova_ext.simulate import nova_config
from gpu_nova_ext.simulate import nova_flavors
from gpu_nova_ext.simulate import scenario as scn

# Request filters that read Nova's databases (compute service versions);
# see :func:`prefilter`.
DB_REQUEST_FILTERS = ('owner_nova_filter',)

PROJECT_ID = identity.PROJECT_ID
USER_ID = identity.USER_ID


def admin_context() -> Any:
    """A ``nova.context.RequestContext`` of the simulator's project."""
    nova_config.load_nova()
    from nova import context as nova_context
    return nova_context.RequestContext(
        user_id=USER_ID, project_id=PROJECT_ID, is_admin=True)


def request_spec(ctx: Any, flavor: scn.Flavor, instance_uuid: str) -> Any:
    """A RequestSpec as nova-api builds it for a one-server boot."""
    from nova import objects
    nova_flavor = nova_flavors.make_flavor(flavor)
    image = objects.ImageMeta(properties=objects.ImageMetaProps())
    spec = objects.RequestSpec.from_components(
        ctx, instance_uuid, image, nova_flavor, None,
        nova_flavors.pci_requests(nova_flavor), {}, None, None,
        project_id=PROJECT_ID, user_id=USER_ID)
    return spec


def prefilter(ctx: Any, spec: Any) -> None:
    """Nova's scheduler request filters (``process_reqspec``).

    ``owner_nova_filter`` asks the cell databases for the minimum
    nova-compute version; the simulated computes are all current Nova, so
    the simulator applies its outcome for that case: ``OWNER_NOVA`` is
    required on the root provider and on PCI request groups.
    """
    from nova.scheduler import request_filter
    for func in request_filter.ALL_REQUEST_FILTERS:
        if getattr(func, '__name__', '') in DB_REQUEST_FILTERS:
            continue
        func(ctx, spec)
    spec.root_required.add(os_traits.OWNER_NOVA)
    pci_ids = {req.request_id for req in spec.pci_requests.requests
               if req.request_id}
    for group in spec.requested_resources or []:
        if (group.requester_id and
                group.requester_id.rsplit('-', 1)[0] in pci_ids):
            group.required_traits.add(os_traits.OWNER_NOVA)


def pin(spec: Any, host: str, nodename: str) -> None:
    """Ask for ``host`` as ``openstack server create --host`` does.

    Compute API 2.74: nova-api sets the RequestSpec's
    ``requested_destination``; the scheduler then asks Placement in that
    compute node's tree (``in_tree``) and still runs every filter.
    """
    from nova import objects
    spec.requested_destination = objects.Destination(host=host,
                                                     node=nodename)


class ComputeNodes:
    """The one lookup of Nova's HostManager a pinned request needs.

    ``resources_from_request_spec`` asks
    ``get_compute_nodes_by_host_or_node`` (the cell database in Nova) for
    the node of ``requested_destination``, to set ``in_tree``; here the
    simulated hosts answer, by name.
    """

    def __init__(self, hosts: dict):
        self.hosts = hosts

    def get_compute_nodes_by_host_or_node(self, ctxt, host, node,
                                          cell=None):
        from nova import objects
        found = self.hosts.get(host)
        if found is None or (node and node != found.nodename):
            return objects.ComputeNodeList(objects=[])
        return objects.ComputeNodeList(objects=[objects.ComputeNode(
            uuid=found.root_uuid, host=found.name,
            hypervisor_hostname=found.nodename)])


def resource_request(ctx: Any, spec: Any,
                     nodes: ComputeNodes | None = None) -> Any:
    """``nova.scheduler.utils.resources_from_request_spec``.

    :param nodes: answers the compute node lookup of a pinned request
        (:func:`pin`).
    """
    from nova.scheduler import utils
    return utils.resources_from_request_spec(ctx, spec, nodes)
