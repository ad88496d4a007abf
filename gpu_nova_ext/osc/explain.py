# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu explain``: for a flavor (and project) or a server,
every compute host with the rule that removes it or its rank and each
weigher's share (:mod:`gpu_nova_ext.operator.explain`: the cloud's
snapshot played by the simulator, the scheduler's own code).

The rows go through cliff (``-f json``); the first line on stderr says
what the answer does not account for, then a quota refusal (once, not
per host) and the notes, one line each.
"""
from osc_lib.cli import format_columns

from gpu_nova_ext.operator import explain
from gpu_nova_ext.operator import reservation
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.osc import command
from gpu_nova_ext.osc import snapshot as snapshot_cmd
from gpu_nova_ext.simulate import nova_conf_file

COLUMNS = ('Host', 'Verdict', 'Rule', 'Reason', 'Weight', 'Weights')


class ExplainPlacement(command.Lister):
    """Explain where a GPU server lands, or why it finds no host."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument(
            '--flavor', metavar='<flavor>',
            help='Explain a new server of this flavor (name).')
        what.add_argument(
            '--server', metavar='<server>',
            help='Explain the request of this server (name or id; any '
                 'project): its own flavor and project. A server in '
                 'ERROR (NoValidHost) is explained as it would be asked '
                 'now; a running one as if it were asked again.')
        parser.add_argument(
            '--project', metavar='<project-id>',
            help="The project that asks (its GPU reservations and "
                 "quotas); default: the server's, or none.")
        parser.add_argument(
            '--nova-conf', action='append', default=[], metavar='<file>',
            help=nova_conf_file.HELP)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        notes = []
        if parsed_args.project:
            note = reservation.check_project(client.conn,
                                             parsed_args.project)
            if note:
                notes.append(note)
        # a bad file is said before the cloud is read
        nova_conf = nova_conf_file.given(parsed_args.nova_conf)
        facts, snap = snapshot_cmd.take(client)
        if parsed_args.server:
            request = explain.request_of_server(
                facts, parsed_args.server, parsed_args.project)
            facts = explain.without_server(facts, request.server)
            snap = snapshot.build(facts, snap.taken_at)
        else:
            request = explain.request_of_flavor(
                facts, parsed_args.flavor, parsed_args.project)
        found = explain.answer(facts, snap, request, nova_conf)
        say = self.app.stderr.write
        say('openstack %s: not accounted for: %s\n' % (
            self.cmd_name, '; '.join(explain.unaccounted(
                nova_conf and nova_conf[0]))))
        if found.quota:
            say('openstack %s: %s of project %s refuses this request '
                'before any host is looked at: %s\n' % (
                    self.cmd_name, explain.QUOTA, request.project,
                    found.quota))
        for line in notes + found.notes:
            say('openstack %s: %s\n' % (self.cmd_name, line))
        return COLUMNS, [
            (r.host, r.verdict, r.rule, r.reason, r.weight,
             format_columns.DictColumn(r.weights))
            for r in found.rows]
