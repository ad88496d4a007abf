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

"""``gpu-nova-ext audit``: the cluster's GPUs from Placement."""
import argparse
import json
import math
import sys
import time

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit

LOG = logging.getLogger(__name__)

#: the longest --state-wait: agents cast every report_interval (60 s by
#: default), so a few minutes hear every live agent
MAX_STATE_WAIT = 3600.0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'audit',
        help='Cluster view of GPUs from Placement.',
        description=(
            'GPUs per host, model and mode with free and used capacity, '
            'driver branches across hosts with the outliers named, '
            'unhealthy and reserved GPUs.  Reads Placement through the '
            '[placement] options; with --state-wait, also listens for the '
            "agents' GPU state (health) on the schedulers' transport_url."))
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table')
    parser.add_argument(
        '--state-wait', type=float, default=0.0, metavar='SECONDS',
        help='Listen this long for GPU state from the agents (needs '
             'transport_url; 0, the default, reads Placement only; at '
             'most %d).' % MAX_STATE_WAIT)
    parser.add_argument(
        '--energy-window', type=float, default=0.0, metavar='SECONDS',
        help='Instead of the GPU view: the GPU energy each server and '
             "project used over this many seconds, read from the agents' "
             'exporters at its start and end (at most %d; longer windows: '
             'Prometheus).' % MAX_STATE_WAIT)
    parser.add_argument(
        '--exporter', action='append', default=[], metavar='HOST=URL',
        help="A host's exporter URL for --energy-window (default "
             'http://HOST:<[agent] prometheus_port>/metrics); repeatable.')
    parser.set_defaults(func=run)


def live_states(conf: cfg.ConfigOpts, wait: float) -> dict[str, dict]:
    """GPU state payloads by host, heard within ``wait`` seconds.

    Best effort: an unreachable message bus gives an empty answer and a
    warning.
    """
    from gpu_nova_ext.state import cache as state_cache

    cache = state_cache.get_cache()
    try:
        cache.start(conf)
    except Exception as exc:
        LOG.warning('No live GPU state (%s); auditing from Placement only.',
                    exc)
        return {}
    try:
        time.sleep(wait)
        return {host: cache.get(host) for host in cache.hosts()
                if cache.get(host)}
    finally:
        cache.stop()


def check_state_wait(value: float) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_STATE_WAIT):
        raise exception.InvalidArgument(
            argument='--state-wait', value=value,
            reason='give the seconds to listen for the agents, from 0 to '
                   '%d' % MAX_STATE_WAIT)
    return value


def exporter_urls(args, conf, hosts) -> dict[str, str]:
    urls = {h: 'http://%s:%d/metrics' % (h, conf.agent.prometheus_port)
            for h in hosts}
    for item in args.exporter:
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


def run_energy(args, conf, client) -> int:
    from gpu_nova_ext.operator import audit_energy

    window = args.energy_window
    if not (math.isfinite(window) and 0 < window <= MAX_STATE_WAIT):
        raise exception.InvalidArgument(
            argument='--energy-window', value=window,
            reason='give the seconds to measure, more than 0 and at most '
                   '%d' % MAX_STATE_WAIT)
    urls = exporter_urls(args, conf, audit_energy.hosts(
        audit.collect(client)))
    warnings: list[str] = []
    before = audit_energy.scrape_all(urls, warnings)
    wait_window(window)
    after = audit_energy.scrape_all(urls, [])
    servers = {s for readings in after.values() for s in readings}
    projects = {s: audit_energy.project_of(client, s) for s in servers}
    report = audit_energy.build(window, before, after, projects, warnings)
    if args.format == 'json':
        json.dump(report.to_dict(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(audit_energy.render_table(report))
    return 0


def run(args: argparse.Namespace, conf: cfg.ConfigOpts,
        client=None) -> int:
    check_state_wait(args.state_wait)
    if client is None:
        from gpu_nova_ext.placement import client as placement_client
        client = placement_client.PlacementClient(conf)
    if args.energy_window:
        return run_energy(args, conf, client)
    providers = audit.collect(client)
    states = live_states(conf, args.state_wait) if args.state_wait else {}
    report = audit.build_report(providers, states)
    if args.format == 'json':
        json.dump(report.to_dict(), sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(audit.render_table(report))
    return 0
