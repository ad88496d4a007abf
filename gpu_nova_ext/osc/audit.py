# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu audit``: the cloud's GPUs by host, model and mode, the
driver branches with the outliers named, unhealthy and reserved GPUs;
with ``--energy-window``, the GPU energy of each server and project.

``-f json`` gives the documented keys of
:meth:`gpu_nova_ext.operator.audit.AuditReport.to_dict` (and of
:meth:`gpu_nova_ext.operator.audit_energy.EnergyReport.to_dict`).
"""
import math
import time

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.osc import command
from gpu_nova_ext.osc import gpu as gpu_cmd


def exporter_urls(exporters, conf, hosts) -> dict[str, str]:
    urls = {h: 'http://%s:%d/metrics' % (h, conf.agent.prometheus_port)
            for h in hosts}
    for item in exporters:
        host, sep, url = item.partition('=')
        if not sep or not host or not url.startswith(('http://',
                                                      'https://')):
            raise exception.InvalidArgument(
                argument='--exporter', value=item,
                reason='give HOST=URL, e.g. cmp-1=http://cmp-1:9835/metrics')
        urls[host] = url
    return urls


def wait_window(seconds: float) -> None:
    """The energy window between the two readings."""
    time.sleep(seconds)


def energy(parsed_args, conf, placement) -> dict:
    from gpu_nova_ext.operator import audit_energy

    window = parsed_args.energy_window
    if not (math.isfinite(window) and
            0 < window <= live_state.MAX_STATE_WAIT):
        raise exception.InvalidArgument(
            argument='--energy-window', value=window,
            reason='give the seconds to measure, more than 0 and at most '
                   '%d' % live_state.MAX_STATE_WAIT)
    urls = exporter_urls(parsed_args.exporter, conf, audit_energy.hosts(
        audit.collect(placement)))
    warnings: list[str] = []
    before = audit_energy.scrape_all(urls, warnings)
    wait_window(window)
    after = audit_energy.scrape_all(urls, [])
    servers = {s for readings in after.values() for s in readings}
    projects = {s: audit_energy.project_of(placement, s) for s in servers}
    return audit_energy.build(window, before, after, projects,
                              warnings).to_dict()


class AuditGpus(command.ShowOne):
    """Audit the cloud's GPUs: capacity, drivers, health, reservations."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        gpu_cmd.add_state_args(parser)
        parser.add_argument(
            '--energy-window', type=float, default=0.0,
            metavar='<seconds>',
            help="Instead of the GPU view: the GPU energy each server and "
                 "project used over this many seconds, read from the "
                 "agents' exporters at its start and end (at most %d; "
                 'longer windows: Prometheus).' % live_state.MAX_STATE_WAIT)
        parser.add_argument(
            '--exporter', action='append', default=[],
            metavar='<host>=<url>',
            help="A host's exporter URL for --energy-window (default "
                 'http://HOST:<[agent] prometheus_port>/metrics); '
                 'repeatable.')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        if parsed_args.energy_window:
            live_state.check_state_wait(parsed_args.state_wait)
            return command.record(energy(
                parsed_args, client.load_conf(parsed_args.config_file),
                client.placement))
        return command.record(gpu_cmd.read_report(client,
                                                  parsed_args).to_dict())
