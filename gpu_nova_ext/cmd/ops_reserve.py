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

"""``gpu-nova-ext reserve`` / ``unreserve``: keep GPUs or whole hosts for
one project (design doc: Reservations)."""
import argparse
import json
import sys

from oslo_config import cfg

from gpu_nova_ext.cmd import ops_common
from gpu_nova_ext import exception
from gpu_nova_ext.operator import reservation
from gpu_nova_ext.operator import reservation_hosts

GPU_NOTE = ('other projects are kept off reserved GPUs by %s and the '
            'project goes there first by GpuReservationWeigher: both must be '
            'enabled in nova-scheduler\'s nova.conf ([filter_scheduler] '
            'enabled_filters, weight_classes); gpu-nova-agent on the host '
            'sends the reservation within one report interval'
            % reservation.GPU_FILTER)
HOST_NOTE = ('other projects are kept off reserved hosts by Nova\'s %s '
             'filter: it must be in nova-scheduler\'s [filter_scheduler] '
             'enabled_filters ([scheduler] limit_tenants_to_placement_'
             'aggregate = true also confines the project to them)'
             % reservation.HOST_FILTER)


def _selectors(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument('--project', metavar='PROJECT',
                        help='Project id (openstack project list).')
    parser.add_argument('--host', metavar='HOST',
                        help='Compute host (as nova-compute reports it); '
                             'without --gpu, the whole host %s.' % what)
    parser.add_argument('--gpu', action='append', metavar='ADDR',
                        help='PCI address of one GPU of --host (repeat for '
                             'several; for vGPUs on SR-IOV VFs, each VF).')
    parser.add_argument('--aggregate', metavar='NAME',
                        help='Nova host aggregate whose hosts are %s.' % what)
    ops_common.add_cloud_arg(parser)


def register(subparsers) -> None:
    reserve = subparsers.add_parser(
        'reserve',
        help='Keep GPUs, hosts or an aggregate for one project.',
        description=(
            'Keeps GPUs for PROJECT: other projects\' GPU requests never '
            'land on them and PROJECT\'s requests go there first.  One GPU '
            '(--host H --gpu ADDR): the trait CUSTOM_GPU_RESERVED_<PROJECT> '
            'on its Placement providers, enforced by GpuReservationFilter.  '
            'A whole host (--host H) or aggregate (--aggregate A): a Nova '
            'aggregate with metadata filter_tenant_id=PROJECT (gpu-reserved-'
            '<PROJECT> for a host), enforced by Nova\'s '
            'AggregateMultiTenancyIsolation filter.  --list shows every '
            'reservation.'))
    _selectors(reserve, 'reserved')
    reserve.add_argument('--force', action='store_true',
                         help='Move a GPU or host reserved for another '
                              'project to PROJECT.')
    reserve.add_argument('--list', action='store_true',
                         help='List the reservations (of --project only, '
                              'when given).')
    reserve.add_argument('--format', choices=('table', 'json'),
                         default='table', help='Output of --list.')
    reserve.set_defaults(func=run_reserve)

    unreserve = subparsers.add_parser(
        'unreserve',
        help='Remove a reservation made with reserve.',
        description=('Removes PROJECT\'s reservation of the GPU(s), host or '
                     'aggregate given, with the same selectors as '
                     'reserve.'))
    _selectors(unreserve, 'no longer reserved')
    unreserve.set_defaults(func=run_unreserve)


def _check_args(args) -> None:
    def bad(value, reason):
        raise exception.InvalidArgument(argument='arguments', value=value,
                                        reason=reason)
    if not args.project:
        bad('(no --project)', 'give --project PROJECT (openstack project '
                              'list), or --list')
    if bool(args.host) == bool(args.aggregate):
        bad('(--host %s, --aggregate %s)' % (args.host, args.aggregate),
            'give exactly one of --host HOST [--gpu ADDR] and --aggregate '
            'NAME')
    if args.gpu and not args.host:
        bad('--gpu', '--gpu needs --host HOST')


def _apply(args, conf, conn_factory, placement_factory, undo: bool) -> int:
    _check_args(args)
    reservation.check_project_format(args.project)
    addresses = reservation.parse_addresses(args.gpu)
    conn, placement = ops_common.connections(args, conf, conn_factory,
                                             placement_factory)
    say = ops_common.report
    note = reservation.check_project(conn, args.project)
    if note:
        say('note: ' + note)
    force = getattr(args, 'force', False)
    lines = []
    if addresses:
        # every GPU is checked before any is changed
        for address in addresses:
            reservation.gpu_providers(placement, args.host, address)
        for address in addresses:
            if undo:
                lines += reservation.unreserve_gpu(placement, args.project,
                                                   args.host, address)
            else:
                lines += reservation.reserve_gpu(placement, args.project,
                                                 args.host, address, force)
    elif args.host:
        if undo:
            lines = reservation_hosts.unreserve_host(conn, args.project,
                                                     args.host)
        else:
            lines = reservation_hosts.reserve_host(conn, args.project,
                                                   args.host, force)
    elif undo:
        lines = reservation_hosts.unreserve_aggregate(conn, args.project,
                                                      args.aggregate)
    else:
        lines = reservation_hosts.reserve_aggregate(conn, args.project,
                                                    args.aggregate, force)
    for line in lines:
        say(line)
    if not undo:
        say('note: ' + (GPU_NOTE if addresses else HOST_NOTE))
    return 0


def run_list(args, conf, conn_factory=None, placement_factory=None) -> int:
    if args.project:
        reservation.check_project_format(args.project)
    conn, placement = ops_common.connections(args, conf, conn_factory,
                                             placement_factory)
    found = (reservation.trait_reservations(placement, args.project)
             + reservation_hosts.aggregate_reservations(conn, args.project))
    if args.format == 'json':
        json.dump({'reservations': [r.to_dict() for r in found]},
                  sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(reservation.render(found))
    return 0


def run_reserve(args: argparse.Namespace, conf: cfg.ConfigOpts,
                conn_factory=None, placement_factory=None) -> int:
    if args.list:
        if args.host or args.gpu or args.aggregate or args.force:
            raise exception.InvalidArgument(
                argument='arguments', value='--list',
                reason='--list takes only --project and --format')
        return run_list(args, conf, conn_factory, placement_factory)
    if args.format != 'table':
        raise exception.InvalidArgument(
            argument='arguments', value='--format %s' % args.format,
            reason='--format is for --list only')
    return _apply(args, conf, conn_factory, placement_factory, undo=False)


def run_unreserve(args: argparse.Namespace, conf: cfg.ConfigOpts,
                  conn_factory=None, placement_factory=None) -> int:
    return _apply(args, conf, conn_factory, placement_factory, undo=True)
