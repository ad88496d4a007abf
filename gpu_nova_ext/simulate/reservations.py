# SPDX-License-Identifier: Apache-2.0

"""The scenario key ``reservations:``: GPUs and hosts kept for a project.

Design doc: Reservations.  What ``openstack gpu reservation create`` does,
before the first boot, so an operator sees its effect before applying
it::

    reservations:
      - {project: team-a, host: cmp-1, gpu: "0000:3b:00.0"}   # one GPU
      - {project: team-b, host: cmp-2}                        # whole host
    boots:
      - {flavor: vgpu.a100, count: 2, project: team-a}
      - {flavor: vgpu.a100, count: 2, project: team-c}

* One GPU: the same code as the command
  (:func:`gpu_nova_ext.operator.reservation.reserve_gpu`) puts the
  project's trait on the GPU's providers in the embedded Placement; the
  host's real agent cycle reads it and casts ``reserved_for``;
  GpuReservationFilter and GpuReservationWeigher act on it.
* A whole host: the host joins the aggregate ``gpu-reserved-<project>``
  with metadata ``filter_tenant_id=<project>``, as the command makes it;
  Nova's AggregateMultiTenancyIsolation filter is added to the default
  filter list (a scenario that sets its own ``enabled_filters`` must name
  it, else the output says the reservation is not enforced).

A boot's ``project:`` is the RequestSpec's project (default: the
simulator's).  The output lists each reservation with the servers that
got it and the other projects' servers kept off it.
"""
import dataclasses

from gpu_nova_ext import naming
from gpu_nova_ext.operator import reservation as op
from gpu_nova_ext.operator import reservation_hosts as op_hosts
from gpu_nova_ext.simulate import identity
from gpu_nova_ext.simulate import schema

HOST_FILTER = op.HOST_FILTER
GPU_FILTER = op.GPU_FILTER


@dataclasses.dataclass
class Reserved:
    project: str
    host: str
    gpu: str | None = None        # None: the whole host


def parse(src: schema.Source, value: list | None,
          scenario) -> list[Reserved]:
    """The ``reservations:`` list; whole hosts join their aggregate.

    The scenario schema has checked each entry; what is left here (the
    host and GPU exist, one project each) depends on other entries.
    """
    out: list[Reserved] = []
    owners: dict[tuple, str] = {}
    for i, item in enumerate(value or []):
        entry = 'reservations[%d]' % i
        project, name = item['project'], item['host']
        host = scenario.host(name)
        if host is None:
            raise src.fail(entry + '.host', 'unknown host %r (hosts: %s)'
                           % (name, ', '.join(h.name for h in
                                              scenario.hosts[:10])))
        gpu = None
        if 'gpu' in item:
            gpu = naming.normalize_pci_address(item['gpu'])
            func = host.function(gpu)
            if func is None or not func.is_gpu and gpu not in host.gpus:
                raise src.fail(entry + '.gpu', 'host %s has no GPU %s '
                               '(GPUs: %s)' % (name, gpu, ', '.join(
                                   sorted(host.gpus) or [
                                       f.address for f in
                                       host.pci_functions if f.is_gpu])))
            if host.nova_gpu_mode == 'pci':
                raise src.fail(entry + '.gpu', 'host %s reports its GPUs '
                               'as PCI-in-Placement providers, whose '
                               'traits nova-compute rewrites; reserve '
                               'the whole host instead ({project: %s, '
                               'host: %s})' % (name, project, name))
        key = (name, gpu)
        if owners.get(key, project) != project:
            raise src.fail(entry, '%s is reserved for %s already; one '
                           'project per GPU or host' % (
                               gpu or name, owners[key]))
        owners[key] = project
        if gpu is None:
            host.aggregates[op_hosts.aggregate_name(project)] = {
                op.TENANT_KEY: project}
        out.append(Reserved(project=project, host=name, gpu=gpu))
    return out


def extra_filters(scenario) -> list[str]:
    """Filters the default list gains for the scenario's reservations."""
    if any(r.gpu is None for r in getattr(scenario, 'reservations', ())):
        return [HOST_FILTER]
    return []


def apply(scenario, host) -> None:
    """Reserve the host's GPUs in Placement, as ``reserve --gpu`` does."""
    for r in getattr(scenario, 'reservations', ()):
        if r.host == host.name and r.gpu is not None:
            op.reserve_gpu(host.client, r.project, host.nodename, r.gpu)


def _not_enforced(scenario, whole_host: bool) -> str | None:
    enabled = (scenario.nova_conf.get('filter_scheduler') or {}).get(
        'enabled_filters')
    if enabled is None:
        return None
    if isinstance(enabled, str):
        enabled = [f.strip() for f in enabled.split(',')]
    needed = HOST_FILTER if whole_host else GPU_FILTER
    if needed in enabled:
        return None
    return 'NOT ENFORCED: %s is not in nova_conf enabled_filters' % needed


def summary(result) -> list[dict]:
    """Per reservation: who got it, who was kept off.

    A server remediation moved counts where its last move took it.
    """
    scenario = result.scenario
    # where remediation moved a server (its last move), else where it booted
    moved = {m.server: (m.to_host, m.to_gpus) for m in result.moves or ()
             if m.outcome == 'moved'}
    out = []
    for r in getattr(scenario, 'reservations', ()):
        row = {'project': r.project, 'host': r.host,
               'gpu': r.gpu or '(whole host)', 'servers': [],
               'other_projects_servers': [], 'kept_off': [],
               'own_servers_elsewhere': [],
               'note': _not_enforced(scenario, r.gpu is None)}
        for server in result.servers:
            if server.error:
                continue
            project = server.project or identity.PROJECT_ID
            mine = project == r.project
            host, gpus = moved.get(server.server,
                                   (server.host, server.gpus))
            if host == r.host and (r.gpu is None or r.gpu in gpus):
                row['servers' if mine else 'other_projects_servers'].append(
                    server.server)
            elif mine:
                row['own_servers_elsewhere'].append(server.server)
            elif r.gpu in (server.excluded.get(GPU_FILTER) or ()):
                row['kept_off'].append(server.server)
        out.append(row)
    return out


def table(result) -> list[str]:
    """Lines for the table output (nothing without reservations)."""
    rows = summary(result)
    if not rows:
        return []
    out = ['', 'RESERVATIONS']
    for row in rows:
        kept = ''
        if row['gpu'] != '(whole host)':
            kept = '; kept off by %s on that host: %s' % (
                GPU_FILTER, ', '.join(row['kept_off']) or 'none')
        out.append(
            '  %s %s for %s: its servers there: %s; other projects\' '
            'servers there: %s%s; its servers elsewhere: %s%s' % (
                row['host'], row['gpu'], row['project'],
                ', '.join(row['servers']) or 'none',
                ', '.join(row['other_projects_servers']) or 'none', kept,
                ', '.join(row['own_servers_elsewhere']) or 'none',
                ' (%s)' % row['note'] if row['note'] else ''))
    return out
