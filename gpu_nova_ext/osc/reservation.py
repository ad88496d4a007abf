# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu reservation create|list|delete``: keep GPUs or whole
hosts for one project (design doc: Reservations).

One GPU (``--host H --gpu ADDR``): the trait
``CUSTOM_GPU_RESERVED_<PROJECT>`` on its Placement providers, enforced by
GpuReservationFilter.  A whole host (``--host H``) or aggregate
(``--aggregate A``): a Nova aggregate with metadata
``filter_tenant_id=PROJECT`` (``gpu-reserved-<PROJECT>`` for a host),
enforced by Nova's AggregateMultiTenancyIsolation filter.

``reservation list -f json`` keys: ``project``, ``host``, ``gpu`` (None:
the whole host), ``model``, ``mechanism``, ``providers``.
"""
from gpu_nova_ext import exception
from gpu_nova_ext.operator import reservation
from gpu_nova_ext.operator import reservation_hosts
from gpu_nova_ext.osc import command

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
LIST_COLUMNS = ('project', 'host', 'gpu', 'model', 'mechanism', 'providers')


class _Change(command.Command):
    """create and delete: the same selectors, one applies, one undoes."""

    undo = False

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        what = 'no longer reserved' if self.undo else 'reserved'
        parser.add_argument('--project', metavar='<project>', required=True,
                            help='Project id (openstack project list).')
        where = parser.add_mutually_exclusive_group(required=True)
        where.add_argument('--host', metavar='<host>',
                           help='Compute host (as nova-compute reports '
                                'it); without --gpu, the whole host %s.'
                                % what)
        where.add_argument('--aggregate', metavar='<aggregate>',
                           help='Nova host aggregate whose hosts are %s.'
                                % what)
        parser.add_argument('--gpu', action='append', metavar='<address>',
                            help='PCI address of one GPU of --host (repeat '
                                 'for several; for vGPUs on SR-IOV VFs, '
                                 'each VF).')
        if not self.undo:
            parser.add_argument('--force', action='store_true',
                                help='Move a GPU or host reserved for '
                                     'another project to this one.')
        return parser

    def take_action(self, parsed_args):
        args = parsed_args
        if args.gpu and not args.host:
            raise exception.InvalidArgument(
                argument='--gpu', value=' '.join(args.gpu),
                reason='--gpu needs --host HOST')
        reservation.check_project_format(args.project)
        addresses = reservation.parse_addresses(args.gpu)
        client = self.app.client_manager.gpu
        conn = client.conn
        note = reservation.check_project(conn, args.project)
        if note:
            self.say('note: ' + note)
        force = getattr(args, 'force', False)
        lines = []
        if addresses:
            placement = client.placement
            # every GPU is checked before any is changed
            for address in addresses:
                reservation.gpu_providers(placement, args.host, address)
            for address in addresses:
                if self.undo:
                    lines += reservation.unreserve_gpu(
                        placement, args.project, args.host, address)
                else:
                    lines += reservation.reserve_gpu(
                        placement, args.project, args.host, address, force)
        elif args.host:
            lines = (reservation_hosts.unreserve_host(conn, args.project,
                                                      args.host)
                     if self.undo else reservation_hosts.reserve_host(
                         conn, args.project, args.host, force))
        else:
            lines = (reservation_hosts.unreserve_aggregate(
                conn, args.project, args.aggregate) if self.undo
                else reservation_hosts.reserve_aggregate(
                    conn, args.project, args.aggregate, force))
        for line in lines:
            self.say(line)
        if not self.undo:
            self.say('note: ' + (GPU_NOTE if addresses else HOST_NOTE))


class CreateReservation(_Change):
    """Keep GPUs, a host or an aggregate for one project."""


class DeleteReservation(_Change):
    """Remove a reservation made with gpu reservation create."""

    undo = True


class ListReservation(command.Lister):
    """List the GPU and host reservations."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--project', metavar='<project>',
                            help='Only the reservations of this project.')
        return parser

    def take_action(self, parsed_args):
        if parsed_args.project:
            reservation.check_project_format(parsed_args.project)
        client = self.app.client_manager.gpu
        found = (reservation.trait_reservations(client.placement,
                                                parsed_args.project)
                 + reservation_hosts.aggregate_reservations(
                     client.conn, parsed_args.project))
        rows = [r.to_dict() for r in found]
        return LIST_COLUMNS, [
            tuple(command.formattable(r[c]) for c in LIST_COLUMNS)
            for r in rows]
