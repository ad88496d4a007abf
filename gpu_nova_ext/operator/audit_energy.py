# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu audit --energy-window``: GPU energy per server, project.

The agents export each server's GPU energy since they started
(``gpu_nova_ext_server_energy_joules``, see
:mod:`gpu_nova_ext.agent.energy`).  The audit reads every host's exporter
at the start and at the end of the window; a server's energy over the
window is the difference (its whole total when it appeared, or its agent
restarted, during the window).  Placement says each server's project (the
``project_id`` of its allocations).  Hosts whose exporter cannot be read
are named in the report, never left out in silence.

For windows of hours or days, Prometheus keeps the series:
``sum by (instance_uuid) (increase(gpu_nova_ext_server_energy_joules
[1d]))``.
"""
import collections
import dataclasses
import urllib.request

from prometheus_client import parser

from gpu_nova_ext.operator import audit

METRIC = 'gpu_nova_ext_server_energy_joules'
#: Placement's allocations with project_id and user_id
ALLOCATIONS_VERSION = '1.12'
#: seconds one exporter may take to answer
SCRAPE_TIMEOUT = 10.0
JOULES_PER_KWH = 3.6e6


@dataclasses.dataclass
class EnergyReport:
    window_s: float
    #: (server, project, host, joules), most energy first
    servers: list = dataclasses.field(default_factory=list)
    #: project -> joules
    projects: dict = dataclasses.field(default_factory=dict)
    warnings: list = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict:
        return {'window_s': self.window_s,
                'servers': [{'server': s, 'project': p, 'host': h,
                             'joules': j, 'kwh': j / JOULES_PER_KWH}
                            for s, p, h, j in self.servers],
                'projects': {p: {'joules': j, 'kwh': j / JOULES_PER_KWH}
                             for p, j in sorted(self.projects.items())},
                'warnings': list(self.warnings)}


def hosts(providers: list[audit.ProviderView]) -> list[str]:
    """Compute node names that have a GPU provider below them."""
    roots = {v.uuid: v.name for v in providers if v.uuid == v.root_uuid}
    with_gpus = {v.root_uuid for v in providers
                 if v.parent_uuid and (audit.is_gpu_provider(v))}
    return sorted(roots[r] for r in with_gpus if r in roots)


def scrape(url: str) -> dict[str, float]:
    """server -> joules, from one exporter (raises on failure)."""
    with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT) as resp:
        text = resp.read().decode()
    totals: dict[str, float] = collections.defaultdict(float)
    for family in parser.text_string_to_metric_families(text):
        if family.name != METRIC:
            continue
        for sample in family.samples:
            server = sample.labels.get('instance_uuid')
            if server:
                totals[server] += sample.value
    return dict(totals)


def scrape_all(urls: dict[str, str], warnings: list) -> dict:
    """host -> {server: joules}; an unreadable host goes to warnings."""
    found = {}
    for host, url in sorted(urls.items()):
        try:
            found[host] = scrape(url)
        except (OSError, ValueError) as exc:   # URLError is an OSError
            warnings.append('host %s: exporter %s not read (%s); its '
                            'servers are not in this report' % (
                                host, url, exc))
    return found


def project_of(client, server: str) -> str:
    body = client.get('/allocations/%s' % server,
                      version=ALLOCATIONS_VERSION)
    return (body or {}).get('project_id') or '(no allocations: deleted?)'


def build(window_s: float, before: dict, after: dict, projects: dict,
          warnings: list) -> EnergyReport:
    """The report from two readings (host -> {server: joules}); pure."""
    report = EnergyReport(window_s, warnings=list(warnings))
    for host in sorted(set(before) - set(after)):
        report.warnings.append('host %s: exporter read at the start of the '
                               'window only; left out' % host)
    for host, servers in sorted(after.items()):
        if host not in before:
            report.warnings.append('host %s: exporter read at the end of '
                                   'the window only; left out' % host)
            continue
        for server, joules in servers.items():
            start = before[host].get(server)
            used = joules - start if start is not None and (
                joules >= start) else joules
            project = projects.get(server, '(unknown)')
            report.servers.append((server, project, host, used))
            report.projects[project] = report.projects.get(project,
                                                           0.0) + used
    report.servers.sort(key=lambda row: (-row[3], row[0]))
    return report
