# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu snapshot``: the cloud as a ``gpu-nova-ext simulate``
scenario (:mod:`gpu_nova_ext.operator.snapshot`).

The scenario goes to ``--output`` (or stdout); what it could not
represent is in its header comment and on stderr, one line each.
"""
from gpu_nova_ext import exception
from gpu_nova_ext.operator import cloud_facts
from gpu_nova_ext.operator import snapshot
from gpu_nova_ext.osc import command


def cloud_name(client) -> str:
    """How the header names the cloud: clouds.yaml's name, its auth URL."""
    config = client.conn.config
    url = (config.get_auth_args() or {}).get('auth_url')
    return '%s%s' % (config.name or '(OS_* variables)',
                     ' (%s)' % url if url else '')


def take(client) -> tuple[cloud_facts.CloudFacts, snapshot.Snapshot]:
    facts = cloud_facts.collect(client.placement, client.conn)
    return facts, snapshot.build(facts, snapshot.now())


def say_dropped(app, snap: snapshot.Snapshot, cmd_name: str) -> None:
    for line in snap.dropped:
        app.stderr.write('openstack %s: not in the snapshot: %s\n'
                         % (cmd_name, line))


class TakeSnapshot(command.Command):
    """Write the cloud as a simulator scenario (hosts, GPUs, servers)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--output', metavar='<file>',
            help='Write the scenario to this file (default: stdout); '
                 'play it with gpu-nova-ext simulate FILE.')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        _facts, snap = take(client)
        text = snapshot.render(snap, cloud_name(client))
        if parsed_args.output:
            try:
                with open(parsed_args.output, 'w', encoding='utf-8') as f:
                    f.write(text)
            except OSError as exc:
                raise exception.InvalidArgument(
                    argument='--output', value=parsed_args.output,
                    reason='cannot write it (%s); give a writable path'
                    % (exc.strerror or exc))
        else:
            self.app.stdout.write(text)
        say_dropped(self.app, snap, self.cmd_name)
        if parsed_args.output:
            self.app.stderr.write(
                'openstack %s: %d hosts, %d servers written to %s\n' % (
                    self.cmd_name, len(snap.data['hosts']),
                    len(snap.data.get('boots') or []), parsed_args.output))
