# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu capacity``: how many more servers of each GPU flavor
fit now, per GPU model and host aggregate
(:mod:`gpu_nova_ext.operator.capacity`: the cloud's snapshot played by
the simulator, the scheduler's own code).

The rows go through cliff (``-f json`` for dashboards); what the answer
does not account for goes to stderr, one line each.
"""
from gpu_nova_ext import exception
from gpu_nova_ext.operator import capacity
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.osc import command
from gpu_nova_ext.osc import snapshot as snapshot_cmd
from gpu_nova_ext.simulate import nova_conf_file

COLUMNS = ('Flavor', 'GPU Model', 'Aggregate', 'Fits', 'At Least')


class ShowCapacity(command.Lister):
    """Count how many more servers of each GPU flavor fit now."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--flavor', action='append', default=[], metavar='<flavor>',
            help='A GPU flavor to count (name); repeatable. Default: '
                 'every flavor that asks GPUs.')
        parser.add_argument(
            '--aggregate', metavar='<aggregate>',
            help='Only the servers that fit on the hosts of this Nova '
                 'host aggregate (name or id).')
        parser.add_argument(
            '--max-servers', type=int, default=capacity.DEFAULT_MAX_SERVERS,
            metavar='<count>',
            help='Stop counting a flavor at this many servers (default '
                 '%(default)s; "At Least" says it stopped there).')
        parser.add_argument(
            '--nova-conf', action='append', default=[], metavar='<file>',
            help=nova_conf_file.HELP)
        return parser

    def take_action(self, parsed_args):
        if parsed_args.max_servers < 1:
            raise exception.InvalidArgument(
                argument='--max-servers', value=parsed_args.max_servers,
                reason='give 1 or more')
        client = self.app.client_manager.gpu
        aggregate = None
        if parsed_args.aggregate:
            # the name check, and its name when given by id
            nova_actions.aggregate_hosts(client.conn, parsed_args.aggregate)
            aggregate = next(
                (a.name for a in nova_actions.call(client.conn, 'aggregates')
                 if parsed_args.aggregate in (a.name, str(a.id))),
                parsed_args.aggregate)
        # a bad file is said before the cloud is read
        nova_conf = nova_conf_file.given(parsed_args.nova_conf)
        facts, snap = snapshot_cmd.take(client)
        found = capacity.answer(facts, snap, parsed_args.flavor, aggregate,
                                parsed_args.max_servers, nova_conf)
        for line in found.notes:
            self.app.stderr.write('openstack %s: %s\n' % (self.cmd_name,
                                                          line))
        return COLUMNS, [(r.flavor, r.model, r.aggregate, r.fits, r.bounded)
                         for r in found.rows]
