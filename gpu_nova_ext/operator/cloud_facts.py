# SPDX-License-Identifier: Apache-2.0

"""What ``openstack gpu snapshot`` and its users read of the live cloud.

:func:`collect` reads Placement (providers, traits, inventories, usages,
the GPU providers' consumers), Nova (servers, flavors, host aggregates)
and Keystone's unified limits into :class:`CloudFacts`;
:func:`gpu_nova_ext.operator.snapshot.build` makes a scenario of them,
:mod:`gpu_nova_ext.operator.explain` and
:mod:`gpu_nova_ext.operator.capacity` answer questions from them.
"""
import dataclasses
from typing import Any

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import nova_actions

LOG = logging.getLogger(__name__)


@dataclasses.dataclass(kw_only=True, slots=True)
class ServerFact:
    """One Nova server, as the snapshot needs it."""

    id: str
    name: str
    host: str | None
    status: str
    project_id: str | None
    created_at: str
    flavor: dict[str, Any]      # name, vcpus, ram, disk, extra_specs


@dataclasses.dataclass(kw_only=True, slots=True)
class FlavorFact:
    name: str
    vcpus: int
    ram: int
    disk: int
    extra_specs: dict[str, str]


@dataclasses.dataclass(kw_only=True, slots=True)
class LimitFacts:
    """Keystone's unified limits of Nova's service."""

    #: resource name (``class:<RC>``, ``servers``...) -> default limit
    registered: dict[str, int] = dataclasses.field(default_factory=dict)
    #: project id -> resource name -> limit
    projects: dict[str, dict[str, int]] = dataclasses.field(
        default_factory=dict)


@dataclasses.dataclass(kw_only=True, slots=True)
class CloudFacts:
    """What :func:`collect` read; ``snapshot.build`` needs nothing else."""

    providers: list[audit.ProviderView]
    #: root provider uuid -> resource class -> Placement inventory record
    root_inventories: dict[str, dict[str, dict[str, Any]]]
    servers: list[ServerFact]
    flavors: list[FlavorFact]
    #: aggregate name -> (hosts, metadata)
    aggregates: dict[str, tuple[list[str], dict[str, str]]]
    #: root provider uuid -> resource class -> used
    root_usages: dict[str, dict[str, int]] = dataclasses.field(
        default_factory=dict)
    #: GPU provider uuid -> the consumers holding it (providers in use)
    gpu_consumers: dict[str, list[str]] = dataclasses.field(
        default_factory=dict)
    #: None: not read (the reason is in ``unread``)
    limits: LimitFacts | None = None
    #: what could not be read, one line each
    unread: list[str] = dataclasses.field(default_factory=list)


def collect(placement, conn) -> CloudFacts:
    """Read Placement and Nova.

    ``placement`` has ``get(path, version=...)`` (our PlacementClient);
    ``conn`` is an openstacksdk connection (admin: every project's
    servers and the private flavors).
    """
    providers = audit.collect(placement)
    roots, root_usages, gpu_consumers = {}, {}, {}
    for view in providers:
        if view.parent_uuid is None:
            base = '/resource_providers/%s' % view.uuid
            roots[view.uuid] = placement.get(
                base + '/inventories',
                version=audit.PROVIDERS_VERSION)['inventories']
            root_usages[view.uuid] = placement.get(
                base + '/usages', version=audit.PROVIDERS_VERSION)['usages']
        elif audit.is_gpu_provider(view) and any(view.usages.values()):
            # which server holds which GPU (the replay pins it there)
            gpu_consumers[view.uuid] = sorted(placement.get(
                '/resource_providers/%s/allocations' % view.uuid,
                version=audit.PROVIDERS_VERSION)['allocations'])
    servers = []
    for server in nova_actions.call(conn, 'servers', details=True,
                                    all_projects=True):
        flavor = server.flavor or {}
        disk = disk_gb(flavor.get('disk'), flavor.get('ephemeral'),
                       flavor.get('swap'))
        servers.append(ServerFact(
            id=server.id, name=server.name or server.id,
            host=server.hypervisor_hostname or server.compute_host,
            status=server.status or '', project_id=server.project_id,
            created_at=server.created_at or '',
            flavor={'name': flavor.get('original_name')
                    or flavor.get('name'),
                    'vcpus': flavor.get('vcpus'),
                    'ram': flavor.get('ram'), 'disk': disk,
                    'extra_specs': dict(flavor.get('extra_specs') or {})}))
    flavors = [FlavorFact(name=f.name, vcpus=f.vcpus, ram=f.ram,
                          disk=disk_gb(f.disk, f.ephemeral, f.swap),
                          extra_specs=dict(f.extra_specs or {}))
               for f in nova_actions.call(conn, 'flavors', details=True,
                                          get_extra_specs=True,
                                          is_public=None)]
    aggregates = {
        agg.name: (list(agg.hosts or ()), dict(agg.metadata or {}))
        for agg in nova_actions.call(conn, 'aggregates')}
    limits, unread = read_limits(conn)
    return CloudFacts(providers=providers, root_inventories=roots,
                      servers=servers, flavors=flavors,
                      aggregates=aggregates, root_usages=root_usages,
                      gpu_consumers=gpu_consumers, limits=limits,
                      unread=unread)


def read_limits(conn) -> tuple[LimitFacts | None, list[str]]:
    """Keystone's unified limits of Nova's service, or why not read.

    A cloud without unified limits (or a clouds.yaml that cannot reach
    Keystone's limits API) gives None and one line saying so.
    """
    from keystoneauth1 import exceptions as ks_exc
    from openstack import exceptions as sdk_exc

    from gpu_nova_ext.operator import quota_keystone
    try:
        store = quota_keystone.LimitStore(conn)
        limits = LimitFacts(registered={
            name: r.default_limit for name, r in store.registered().items()})
        for lim in store.project_limits():
            limits.projects.setdefault(lim.project_id, {})[
                lim.resource_name] = lim.resource_limit
    except (exception.GpuNovaExtException, sdk_exc.SDKException,
            ks_exc.ClientException) as exc:
        LOG.debug('snapshot: no unified limits read: %s', exc)
        return None, ['GPU quotas: Keystone\'s unified limits were not '
                      'read (%s)' % str(exc).splitlines()[0][:200]]
    return limits, []


def disk_gb(root, ephemeral, swap) -> int:
    """The DISK_GB a flavor's server takes in Placement.

    Root and ephemeral disk and swap (MB, rounded up to GB), as Nova's
    scheduler asks (``nova.scheduler.utils.ResourceRequest``; a server
    booted from a volume takes no root disk, which a flavor cannot say): the
    scenario's flavor has one ``disk_gb``.
    """
    swap_mb = int(swap or 0)
    return int(root or 0) + int(ephemeral or 0) + -(-swap_mb // 1024)
