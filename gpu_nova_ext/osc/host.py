# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu host drain|undrain``: a GPU host out of scheduling for
a driver upgrade, and back in once its agent reports the new driver.

Each move of ``drain --migrate`` is said as it ends; the servers that stay
are listed last, each with why.  The moves follow the ``[remediation]``
options of ``--config-file`` (concurrency, timeouts).
"""
from gpu_nova_ext.cmd import ops_common
from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import drain
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.osc import command


class _HostCommand(command.Command):
    """drain and undrain: one compute host, gpu-nova-ext's options."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('host', metavar='<host>',
                            help='Compute host (as nova-compute reports '
                                 'it).')
        command.add_config_arg(parser)
        return parser

    def begin(self, args):
        """(client, conf, the host's nova-compute service)."""
        client = self.app.client_manager.gpu
        conf = client.load_conf(args.config_file)
        return client, conf, nova_actions.compute_service(client.conn,
                                                          args.host)


class DrainHost(_HostCommand):
    """Disable a GPU host's nova-compute, optionally moving its servers.

    Disables the nova-compute service of HOST with a reason (no new server
    lands there); with --migrate, moves the servers on its GPUs away as
    remediation does (live where Nova can, cold otherwise); with
    --all-servers, every server of HOST, with or without a GPU.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--migrate', action='store_true',
                            help='Also move the servers on its GPUs away.')
        parser.add_argument('--all-servers', action='store_true',
                            help='Move every server of HOST away, those '
                                 'without a GPU too (before a reboot); '
                                 'implies --migrate.')
        parser.add_argument('--reason', default='GPU driver upgrade',
                            metavar='<text>',
                            help='Disabled reason recorded in Nova.')
        parser.add_argument('--dry-run', action='store_true',
                            help='Say what would be done; change nothing.')
        return parser

    def take_action(self, parsed_args):
        args = parsed_args
        client, conf, service = self.begin(args)
        results = drain.drain(
            conf, client.conn, client.placement, args.host, service,
            reason=args.reason, migrate=args.migrate,
            all_servers=args.all_servers, dry_run=args.dry_run,
            say=self.say)
        if not (args.migrate or args.all_servers):
            return 0
        self._say_what_stays(args, results)
        return ops_common.check_results(results, 'drain of %s' % args.host)

    def _say_what_stays(self, args, results) -> None:
        """The servers left on the host, and what that means for a reboot."""
        say = self.say
        stay = [r for r in results
                if r.outcome not in ('moved',) and not (
                    args.dry_run and r.outcome.startswith('would-'))]
        if stay:
            say('stays on %s: %d server(s): %s' % (
                args.host, len(stay), '; '.join(
                    '%s (%s): %s' % (r.decision.server,
                                     r.decision.name or '-',
                                     r.error or r.decision.reason)
                    for r in stay)))
        if not args.all_servers:
            say('note: servers without a GPU were not looked at: a reboot '
                'of %s stops them (gpu host drain --all-servers moves them '
                'too).' % args.host)
        elif stay:
            say('note: a reboot of %s stops the servers that stay.'
                % args.host)
        elif not args.dry_run:
            say('%s holds no server: it can be rebooted.' % args.host)


class UndrainHost(_HostCommand):
    """Re-enable a drained GPU host once it runs the expected driver.

    Only when every GPU of HOST runs driver branch BRANCH, as its
    gpu-nova-agent reads it, and Placement's CUSTOM_GPU_DRIVER_<BRANCH>
    traits say so too.  What the agent reads comes from the traits it
    keeps on the compute node provider (CUSTOM_GPU_HOST_DRIVER_<BRANCH>,
    refused when older than two hours): a clouds.yaml is enough; with a
    transport_url in --config-file, from its live GPU state.  Otherwise
    it names each GPU that lags and what still has to change, and exits 2.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--expect-driver', required=True,
                            metavar='<branch>',
                            help='Driver branch (550) or version '
                                 '(550.54.15) every GPU must run.')
        parser.add_argument(
            '--state-wait', type=float, default=None, metavar='<seconds>',
            help="Listen this long for the agents' GPU state on the "
                 "transport_url of --config-file (default: [remediation] "
                 "state_wait); without a transport_url the state comes "
                 "from the agents' traits in Placement.")
        return parser

    def take_action(self, parsed_args):
        args = parsed_args
        client, conf, service = self.begin(args)
        conn = client.conn
        expected = rollout.branch(args.expect_driver)
        wait = live_state.state_wait(conf, args.state_wait)
        providers = audit.collect(client.placement)
        state = live_state.gpu_states(conf, wait, providers).get(args.host)
        check = rollout.undrain_check(providers, state, args.host, expected,
                                      live=live_state.is_live(conf, wait))
        if check.problems:
            raise exception.UndrainRefused(
                host=args.host, reason='expected driver branch %s, but %s'
                % (expected, '; '.join(check.problems)),
                fix='Still to do: %s; then run gpu host undrain again.'
                % '; '.join('%d. %s' % (n, step)
                            for n, step in enumerate(check.todo, 1)))
        nova_actions.set_service_status(conn, args.host, enabled=True)
        self.say('enabled nova-compute on %s (was %s%s): every GPU runs '
                 'driver branch %s (%s and Placement)' % (
                     args.host, service.status,
                     ': %s' % service.disabled_reason
                     if service.disabled_reason else '', expected,
                     live_state.describe(state)))
