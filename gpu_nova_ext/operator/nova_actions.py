# SPDX-License-Identifier: Apache-2.0

"""Nova through openstacksdk: the reads and moves remediation and drains
need, each error turned into one typed exception that names the fix.

``conn`` is an :class:`openstack.connection.Connection` (clouds.yaml, the
``OS_*`` variables, or any keystoneauth session: see
:func:`gpu_nova_ext.cmd.ops_common.connect`).
"""
import inspect
import time

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import remediation_policy as policy

LOG = logging.getLogger(__name__)

COMPUTE_BINARY = 'nova-compute'


def _unreachable(exc) -> exception.ComputeUnavailable:
    return exception.ComputeUnavailable(cloud='', reason=exc)


def call(conn, method: str, *args, **kwargs):
    """``conn.compute.<method>(...)``; a listing comes back as a list.

    An unreachable API (discovery included) becomes ComputeUnavailable.
    """
    from keystoneauth1 import exceptions as ks_exc
    from openstack import exceptions as os_exc
    try:
        result = getattr(conn.compute, method)(*args, **kwargs)
        # listings are generators that reach the API as they are read
        return list(result) if inspect.isgenerator(result) else result
    except ks_exc.ClientException as exc:
        raise _unreachable(exc)
    except os_exc.HttpException as exc:
        if exc.status_code and exc.status_code >= 500:
            raise _unreachable(exc)
        raise
    except os_exc.SDKException as exc:
        raise _unreachable(exc)


def compute_service(conn, host: str):
    """The nova-compute service of ``host``.

    :raises UnknownHost: no such service.
    """
    found = call(conn, 'services', binary=COMPUTE_BINARY, host=host)
    if not found:
        raise exception.UnknownHost(host=host, where='Nova\'s compute '
                                                     'services')
    return found[0]


def aggregate_hosts(conn, name: str) -> set[str]:
    """The hosts of Nova host aggregate ``name`` (or id).

    :raises InvalidArgument: no such aggregate.
    """
    known = []
    for agg in call(conn, 'aggregates'):
        if agg.name == name or str(agg.id) == name:
            return set(agg.hosts or ())
        known.append(agg.name)
    raise exception.InvalidArgument(
        argument='--aggregate', value=name,
        reason='no such host aggregate in Nova (known: %s); give one of '
               'openstack aggregate list' % (', '.join(sorted(known))
                                             or 'none'))


def service_up(service) -> bool:
    return service.state == 'up' and not service.is_forced_down


def server_facts(conn, consumer) -> policy.ServerFacts:
    """What Nova says about the server of a GPU consumer."""
    from openstack import exceptions as os_exc
    try:
        server = call(conn, 'get_server', consumer.consumer)
    except os_exc.NotFoundException:
        return policy.ServerFacts(id=consumer.consumer, host=consumer.host,
                                  gpu=consumer.gpu, kind=consumer.kind,
                                  exists=False)
    return policy.ServerFacts(
        id=server.id, host=consumer.host, gpu=consumer.gpu,
        kind=consumer.kind, name=server.name, status=server.status,
        task_state=server.task_state, metadata=dict(server.metadata or {}),
        running_on=server.compute_host)


def host_servers(conn, host: str, exclude: set[str]) -> list:
    """Facts of the servers Nova has on ``host`` but those in ``exclude``.

    Every project's; they hold no GPU (``exclude`` has those), so their
    kind is ``no-gpu``.
    """
    out = []
    for server in call(conn, 'servers', details=True, all_projects=True,
                       compute_host=host):
        if server.id in exclude:
            continue
        out.append(policy.ServerFacts(
            id=server.id, host=host, gpu=None, kind=policy.KIND_NO_GPU,
            name=server.name, status=server.status,
            task_state=server.task_state,
            metadata=dict(server.metadata or {}),
            running_on=server.compute_host))
    return out


def get_server(conn, server_id: str):
    from openstack import exceptions as os_exc
    try:
        return call(conn, 'get_server', server_id)
    except os_exc.NotFoundException:
        raise exception.ServerGone(server=server_id)


def start_move(conn, decision: policy.Decision, action: str) -> None:
    """Ask Nova for the move; a refusal raises NovaRefused."""
    from openstack import exceptions as os_exc
    try:
        if action == policy.LIVE:
            call(conn, 'live_migrate_server', decision.server,
                 host=None, block_migration='auto')
        elif action == policy.COLD:
            call(conn, 'migrate_server', decision.server)
        elif action == policy.EVACUATE:
            call(conn, 'evacuate_server', decision.server)
        else:
            raise ValueError(action)
    except os_exc.NotFoundException:
        raise exception.ServerGone(server=decision.server)
    except os_exc.HttpException as exc:
        raise exception.NovaRefused(
            action=action, server=decision.server,
            reason=exc.details or exc,
            fix='Check openstack server show %s and the nova-conductor '
                'log; no other host may fit.' % decision.server)


def migration_ids(conn, server_id: str) -> set:
    """The ids of the server's migration records so far."""
    return {m.id for m in call(conn, 'migrations', instance_uuid=server_id)}


def wait_moved(conn, decision: policy.Decision, action: str,
               timeout: float, interval: float, before: set = frozenset(),
               clock=time.monotonic, sleep=time.sleep):
    """Wait until the server runs elsewhere; confirm a cold migration.

    :param before: :func:`migration_ids` before the move was asked for
    :returns: the server, moved, on its new host.
    :raises NovaRefused: the move failed (the server is back on its host,
        or in ERROR) or did not finish within ``timeout``.
    """
    deadline = clock() + timeout
    confirmed = False
    last_ended = None
    while True:
        server = get_server(conn, decision.server)
        moved = server.compute_host != decision.host
        LOG.debug('%(action)s %(server)s: on %(host)s, status %(status)s, '
                  'task %(task)s', {'action': action,
                                    'server': decision.server,
                                    'host': server.compute_host,
                                    'status': server.status,
                                    'task': server.task_state})
        if server.status == 'ERROR':
            raise exception.NovaRefused(
                action=action, server=decision.server,
                reason='the server went to ERROR (%s)' % (
                    (server.fault or {}).get('message') or 'no fault'),
                fix='Look at openstack server show %s.' % decision.server)
        if (server.status == 'VERIFY_RESIZE' and not confirmed
                and server.task_state is None):
            call(conn, 'confirm_server_resize', decision.server)
            confirmed = True
        elif (moved and server.task_state is None
              and server.status in ('ACTIVE', 'SHUTOFF', 'PAUSED')):
            return server
        elif (not moved and server.task_state is None
              and server.status in ('ACTIVE', 'SHUTOFF', 'PAUSED')):
            # Nova updates the migration and the server one after the
            # other: believe "ended, still here" when two looks agree
            ended = _ended_migration(conn, decision, before)
            if ended is not None and ended == last_ended:
                raise exception.NovaRefused(
                    action=action, server=decision.server,
                    reason='the migration ended (%s) and the server is '
                           'still on %s' % (ended, decision.host),
                    fix='No other host may have a healthy GPU of its '
                        'kind; see openstack server migration list '
                        '--server %s and the nova-conductor log.'
                    % decision.server)
            last_ended = ended
        if clock() >= deadline:
            raise exception.NovaRefused(
                action=action, server=decision.server,
                reason='not done after %ds (status %s, task %s)' % (
                    timeout, server.status, server.task_state),
                fix='Look at openstack server migration list --server %s; '
                    'raise [remediation] action_timeout for big servers.'
                % decision.server)
        sleep(interval)


def _ended_migration(conn, decision, before) -> str | None:
    """The status of the migration asked for once it ended, else None."""
    migrations = [m for m in call(conn, 'migrations',
                                  instance_uuid=decision.server)
                  if m.id not in before]
    if not migrations:
        return None
    last = max(migrations, key=lambda m: (m.created_at or '', m.id))
    if last.status in ('error', 'failed', 'cancelled', 'completed',
                       'done', 'confirmed'):
        return 'migration %s: status %s' % (last.id, last.status)
    return None


def set_service_status(conn, host: str, enabled: bool,
                       reason: str | None = None):
    service = compute_service(conn, host)
    if enabled:
        return call(conn, 'enable_service', service)
    return call(conn, 'disable_service', service,
                disabled_reason=reason)
