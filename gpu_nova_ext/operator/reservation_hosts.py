# SPDX-License-Identifier: Apache-2.0

"""Whole hosts and aggregates kept for a project (design doc: Reservations).

A Nova host aggregate with metadata ``filter_tenant_id=<project>``
(``gpu-reserved-<project>`` for hosts reserved one by one), which Nova's
AggregateMultiTenancyIsolation filter enforces for every request.  ``conn``
is an openstacksdk connection; single GPUs are
:mod:`gpu_nova_ext.operator.reservation`'s.
"""
from gpu_nova_ext import exception
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import reservation

AGGREGATE_PREFIX = reservation.AGGREGATE_PREFIX
TENANT_KEY = reservation.TENANT_KEY
MECHANISM_AGGREGATE = reservation.MECHANISM_AGGREGATE


def aggregate_name(project: str) -> str:
    return AGGREGATE_PREFIX + project


def tenants(aggregate) -> set[str]:
    """The projects an aggregate's metadata keeps it for.

    As Nova reads them: every key starting with filter_tenant_id, values
    comma-separated.
    """
    out = set()
    for key, value in (aggregate.metadata or {}).items():
        if key.startswith(TENANT_KEY) and value:
            out.update(v.strip() for v in value.split(',') if v.strip())
    return out


def _aggregates(conn) -> list:
    return nova_actions.call(conn, 'aggregates')


def _find_aggregate(conn, name: str):
    for agg in _aggregates(conn):
        if agg.name == name or str(agg.id) == name:
            return agg
    return None


def _named_aggregate(conn, name: str):
    agg = _find_aggregate(conn, name)
    if agg is None:
        raise exception.ReservationError(
            what='Aggregate %s' % name, reason='Nova has no such host '
            'aggregate', fix='Give one of openstack aggregate list, or '
            'reserve hosts with --host.')
    return agg


def reserve_host(conn, project: str, host: str,
                 force: bool = False) -> list[str]:
    """Add ``host`` to ``gpu-reserved-<project>`` (made when missing)."""
    reservation.check_project_format(project)
    nova_actions.compute_service(conn, host)
    done = []
    for agg in _aggregates(conn):
        owners = tenants(agg) - {project}
        if host not in (agg.hosts or ()) or not owners:
            continue
        ours = agg.name.startswith(AGGREGATE_PREFIX)
        if not force or not ours:
            if ours:
                fix = ('Run unreserve --project %s --host %s first, or pass '
                       '--force to move it.' % (sorted(owners)[0], host))
            else:
                fix = ('Remove it from that aggregate first (openstack '
                       'aggregate remove host %s %s).' % (agg.name, host))
            raise exception.ReservationError(
                what='Host %s' % host,
                reason='it is in aggregate %s, kept for project %s'
                       % (agg.name, ', '.join(sorted(owners))), fix=fix)
        nova_actions.call(conn, 'remove_host_from_aggregate', agg, host)
        done.append('removed %s from aggregate %s (--force)'
                    % (host, agg.name))
    name = aggregate_name(project)
    agg = _find_aggregate(conn, name)
    if agg is None:
        agg = nova_actions.call(conn, 'create_aggregate', name=name)
        nova_actions.call(conn, 'set_aggregate_metadata', agg,
                          **{TENANT_KEY: project})
        done.append('created aggregate %s (metadata %s=%s)'
                    % (name, TENANT_KEY, project))
    elif project not in tenants(agg):
        nova_actions.call(conn, 'set_aggregate_metadata', agg,
                          **{TENANT_KEY: project})
    if host in (agg.hosts or ()):
        done.append('host %s is reserved for project %s already (aggregate '
                    '%s)' % (host, project, name))
    else:
        nova_actions.call(conn, 'add_host_to_aggregate', agg, host)
        done.append('reserved host %s for project %s (aggregate %s)'
                    % (host, project, name))
    return done


def unreserve_host(conn, project: str, host: str) -> list[str]:
    reservation.check_project_format(project)
    nova_actions.compute_service(conn, host)
    name = aggregate_name(project)
    agg = _find_aggregate(conn, name)
    if agg is None or host not in (agg.hosts or ()):
        return ['host %s was not reserved for project %s (not in aggregate '
                '%s): nothing to do' % (host, project, name)]
    nova_actions.call(conn, 'remove_host_from_aggregate', agg, host)
    done = ['unreserved host %s for project %s (removed from aggregate %s)'
            % (host, project, name)]
    agg = _find_aggregate(conn, name)
    if agg is not None and not agg.hosts:
        nova_actions.call(conn, 'delete_aggregate', agg)
        done.append('deleted the empty aggregate %s' % name)
    return done


def reserve_aggregate(conn, project: str, name: str,
                      force: bool = False) -> list[str]:
    """Keep an existing aggregate's hosts for ``project``."""
    reservation.check_project_format(project)
    agg = _named_aggregate(conn, name)
    owners = tenants(agg)
    if project in owners and len(owners) == 1:
        return ['aggregate %s is reserved for project %s already'
                % (agg.name, project)]
    if owners - {project} and not force:
        raise exception.ReservationError(
            what='Aggregate %s' % agg.name,
            reason='it is kept for project %s' % ', '.join(
                sorted(owners - {project})),
            fix='Pass --force to give it to %s alone.' % project)
    unset = {k: None for k in agg.metadata or {}
             if k.startswith(TENANT_KEY) and k != TENANT_KEY}
    nova_actions.call(conn, 'set_aggregate_metadata', agg,
                      **{TENANT_KEY: project}, **unset)
    moved = sorted(owners - {project})
    return ['reserved aggregate %s (%d host(s): %s) for project %s%s'
            % (agg.name, len(agg.hosts or ()),
               ', '.join(sorted(agg.hosts or ())) or 'none', project,
               ' (taken from project %s: --force)' % ', '.join(moved)
               if moved else '')]


def unreserve_aggregate(conn, project: str, name: str) -> list[str]:
    reservation.check_project_format(project)
    agg = _named_aggregate(conn, name)
    changes = {}
    for key, value in (agg.metadata or {}).items():
        if not key.startswith(TENANT_KEY):
            continue
        values = [v.strip() for v in value.split(',') if v.strip()]
        if project in values:
            rest = [v for v in values if v != project]
            changes[key] = ','.join(rest) if rest else None
    if not changes:
        return ['aggregate %s was not reserved for project %s: nothing to '
                'do' % (agg.name, project)]
    nova_actions.call(conn, 'set_aggregate_metadata', agg, **changes)
    return ['unreserved aggregate %s for project %s' % (agg.name, project)]


def aggregate_reservations(conn, project: str | None = None
                           ) -> list[reservation.Reservation]:
    out = []
    for agg in _aggregates(conn):
        for owner in sorted(tenants(agg)):
            if project is not None and owner != project:
                continue
            for host in sorted(agg.hosts or ()):
                out.append(reservation.Reservation(
                    project=owner, host=host, gpu=None, model=None,
                    mechanism='%s %s' % (MECHANISM_AGGREGATE, agg.name)))
    return out
