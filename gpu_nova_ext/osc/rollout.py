# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu rollout plan|run``: a driver roll-out, planned in
batches and carried out wave by wave (the design document's
*Remediation, drains and driver roll-outs*).

``plan -f json`` gives :class:`gpu_nova_ext.operator.rollout.RolloutPlan`
as a dict: ``batches`` (each ``hosts``, ``down`` by pool,
``over_limit``), ``totals`` and ``allowed`` by pool, ``done`` and
``notes``.  ``run`` carries the same plan out
(:mod:`gpu_nova_ext.operator.rollout_run`), draining each host as
``openstack gpu host drain --migrate`` does
(:func:`gpu_nova_ext.operator.drain.drain`).
"""
import dataclasses
import math
import os

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import drain
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import notifications
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.operator import rollout_metrics
from gpu_nova_ext.operator import rollout_run
from gpu_nova_ext.osc import command


def parse_percent(text: str) -> float:
    try:
        value = float(text.rstrip('%'))
    except ValueError:
        value = -1.0
    if not 0 < value <= 100:
        raise exception.InvalidArgument(
            argument='--max-unavailable', value=text,
            reason='give a percentage above 0 and at most 100, such as 25%')
    return value


class PlanRollout(command.ShowOne):
    """Plan the batches in which to upgrade the GPU hosts' driver.

    Batches of GPU hosts to drain, upgrade and undrain one after the
    other, so that no GPU model loses more than --max-unavailable of its
    GPUs at once; from Placement's view of the GPUs (openstack gpu audit).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--max-unavailable', required=True, metavar='<percent>',
            help='Share of each GPU model that may be out at once (25%% '
                 'or 25).')
        command.add_scope_args(parser, 'the hosts')
        parser.add_argument('--target-driver', metavar='<branch>',
                            help='Leave out hosts whose GPUs run it '
                                 'already.')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        result = make_plan(client, parsed_args,
                           parse_percent(parsed_args.max_unavailable))
        return command.record(dataclasses.asdict(result))


def make_plan(client, args, pct: float) -> rollout.RolloutPlan:
    """The plan of ``args`` (--model, --aggregate, --target-driver)."""
    hosts = (nova_actions.aggregate_hosts(client.conn, args.aggregate)
             if args.aggregate else None)
    report = audit.build_report(audit.collect(client.placement))
    return rollout.plan(
        report, pct, hosts=hosts, model=args.model,
        target_branch=(rollout.branch(args.target_driver)
                       if args.target_driver else None))


class RunRollout(command.Command):
    """Carry a driver roll-out out, wave by wave.

    The waves are the batches of gpu rollout plan.  Before each wave the
    capacity guard is checked again from the live view (hosts whose
    nova-compute is disabled or down, unhealthy GPUs): a wave that would
    take more than --max-unavailable of a GPU pool out does not start.
    Each host of the wave is drained as gpu host drain --migrate (or
    --all-servers) does, the --upgrade-command runs for each host, each
    host is awaited until its gpu-nova-agent reports the target driver
    branch on healthy GPUs and Placement's driver traits agree (as gpu
    host undrain decides), then undrained.  The first host that fails
    stops the run, drained, with one line saying why; --resume carries on
    from --state-file.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--upgrade-command', required=True, metavar='<template>',
            help='Command upgrading one host, with {host} and {driver} '
                 '(the --target-driver given), e.g. "ansible-playbook '
                 'upgrade.yml --limit {host} -e driver={driver}". Split '
                 'as a shell would and run without a shell (see --shell); '
                 'exit code 0 means done.')
        parser.add_argument(
            '--shell', action='store_true',
            help='Run --upgrade-command through /bin/sh -c (pipes, '
                 'redirections), {host} and {driver} quoted.')
        parser.add_argument(
            '--target-driver', metavar='<branch>',
            help='Driver branch (570) or version (570.86.10) to roll out; '
                 'hosts on it already are left out. Needed unless '
                 '--resume.')
        parser.add_argument(
            '--max-unavailable', metavar='<percent>',
            help='Share of each GPU pool that may be out at once (25%% or '
                 '25). Needed unless --resume.')
        command.add_scope_args(parser, 'the hosts')
        parser.add_argument(
            '--all-servers', action='store_true',
            help='Drain every server of each host, those without a GPU '
                 'too (when the upgrade reboots), instead of those on its '
                 'GPUs.')
        parser.add_argument('--reason', default='GPU driver upgrade',
                            metavar='<text>',
                            help='Disabled reason recorded in Nova.')
        parser.add_argument(
            '--state-file', metavar='<file>',
            help='JSON file where the progress is written after every '
                 'step (hosts done, failed and why); the output of each '
                 'host\'s upgrade goes to FILE.HOST.log. Needed by '
                 '--resume.')
        parser.add_argument(
            '--metrics-file', metavar='<file.prom>',
            help='Prometheus metrics of the progress (hosts per step, '
                 'failed hosts, waves done), rewritten after every step: '
                 'a .prom file in the node exporter\'s textfile collector '
                 'directory. Each step is also notified '
                 '(gpu.rollout.*) where [oslo_messaging_notifications] of '
                 '--config-file names a driver.')
        parser.add_argument(
            '--resume', action='store_true',
            help='Carry on the roll-out of --state-file: done hosts are '
                 'skipped, a failed host retries the step it failed at.')
        parser.add_argument(
            '--upgrade-timeout', type=float, default=3600.0,
            metavar='<seconds>',
            help='Seconds an upgrade command may run (default 3600).')
        parser.add_argument(
            '--wait-timeout', type=float, default=900.0,
            metavar='<seconds>',
            help='Seconds to wait after the upgrade for the agent to '
                 'report the target driver on healthy GPUs (default 900).')
        parser.add_argument(
            '--state-wait', type=float, default=None, metavar='<seconds>',
            help="Listen this long for the agents' GPU state at each look "
                 '(default: [remediation] state_wait).')
        parser.add_argument('--dry-run', action='store_true',
                            help='Print the waves and the commands; change '
                                 'nothing.')
        command.add_config_arg(parser)
        return parser

    def take_action(self, parsed_args):
        args = parsed_args
        client = self.app.client_manager.gpu
        conf = client.load_conf(args.config_file)
        for name in ('upgrade_timeout', 'wait_timeout'):
            _check_seconds('--' + name.replace('_', '-'), getattr(args, name))
        if args.metrics_file and not args.metrics_file.endswith('.prom'):
            raise exception.InvalidArgument(
                argument='--metrics-file', value=args.metrics_file,
                reason="the node exporter's textfile collector reads only "
                       'files named *.prom')
        wait = live_state.state_wait(conf, args.state_wait)
        upgrade = rollout_run.UpgradeCommand(template=args.upgrade_command,
                                             shell=args.shell)
        state = self._state(client, args)
        if state.finished:
            self.say('nothing to do: no host left to upgrade to driver '
                     'branch %s' % state.target)
            return 0
        # a bad template is refused before anything changes
        for wave in state.waves:
            for host in wave.hosts:
                upgrade.argv(host, state.driver)
        if args.dry_run:
            self._dry_run(state, upgrade, args)
            return 0
        save = self._saver(args.state_file, args.metrics_file)
        save(state)
        notifier = notifications.Notifier(
            conf, publisher=notifications.ROLLOUT_PUBLISHER)
        runner = rollout_run.Runner(
            state, cloud=rollout_run.Cloud(conf, client.conn,
                                           client.placement, wait),
            drain=lambda host: self._drain(args, host), upgrade=upgrade,
            say=self.say, save=save, notify=notifier.notify,
            all_servers=args.all_servers,
            upgrade_timeout=args.upgrade_timeout,
            wait_timeout=args.wait_timeout,
            poll_interval=conf.remediation.poll_interval,
            log_prefix=args.state_file)
        runner.run()
        return 0

    @staticmethod
    def _saver(state_file: str | None, metrics_file: str | None):
        """Writes the state file and the metrics file (those given)."""
        def save(state: rollout_run.RunState) -> None:
            if state_file:
                rollout_run.save(state_file, state)
            if metrics_file:
                rollout_metrics.write(metrics_file, state)
        return save

    def _state(self, client, args) -> rollout_run.RunState:
        """The roll-out to carry out: the state file's, or a new plan's."""
        pct = (parse_percent(args.max_unavailable)
               if args.max_unavailable else None)
        if args.resume:
            if not args.state_file:
                raise exception.InvalidArgument(
                    argument='--resume', value='',
                    reason='give the --state-file of the roll-out to '
                           'carry on')
            state = rollout_run.load(args.state_file)
            for name, given, have in (('--target-driver',
                                       args.target_driver, state.driver),
                                      ('--max-unavailable', pct,
                                       state.max_unavailable)):
                if given is not None and given != have:
                    raise exception.InvalidArgument(
                        argument=name, value=given,
                        reason='the roll-out of %s has %s; leave it out '
                               'with --resume, or start a new roll-out '
                               'with another --state-file'
                               % (args.state_file, have))
            return state
        for name, value in (('--target-driver', args.target_driver),
                            ('--max-unavailable', pct)):
            if value is None:
                raise exception.InvalidArgument(
                    argument=name, value='(none)',
                    reason='a new roll-out needs --target-driver and '
                           '--max-unavailable (or --resume)')
        if args.state_file and os.path.exists(args.state_file):
            old = rollout_run.load(args.state_file)
            if not old.finished:
                raise exception.InvalidArgument(
                    argument='--state-file', value=args.state_file,
                    reason='it holds an unfinished roll-out to driver '
                           'branch %s: carry it on with --resume, or '
                           'remove the file' % old.target)
        plan = make_plan(client, args, pct)
        for note in plan.notes:
            self.say('note: %s' % note)
        return rollout_run.RunState.from_plan(plan, args.target_driver, pct)

    def _dry_run(self, state, upgrade, args) -> None:
        say = self.say
        total = len(state.waves)
        for n, wave in enumerate(state.waves, 1):
            say('dry run: wave %d/%d: %s (%s)' % (
                n, total, ', '.join(wave.hosts), rollout_run.describe_down(
                    wave, state.totals, state.allowed)))
            for host in wave.hosts:
                step = state.hosts[host].step
                if step == rollout_run.DONE:
                    say('dry run: %s: done already' % host)
                    continue
                if step == rollout_run.PENDING:
                    say('dry run: %s: would drain (gpu host drain %s %s)' % (
                        host, host, '--all-servers' if args.all_servers
                        else '--migrate'))
                if step in (rollout_run.PENDING, rollout_run.DRAINED):
                    say('dry run: %s: would run: %s' % (
                        host, upgrade.text(host, state.driver)))
                say('dry run: %s: would wait for driver branch %s on '
                    'healthy GPUs (at most %ds), then undrain' % (
                        host, state.target, args.wait_timeout))

    def _drain(self, args, host: str) -> None:
        """``openstack gpu host drain HOST --migrate|--all-servers``.

        Not a host whose nova-compute someone disabled for another reason:
        its undrain would enable it.
        """
        service = nova_actions.compute_service(
            self.app.client_manager.gpu.conn, host)
        reason = service.disabled_reason or ''
        if (service.status == 'disabled'
                and not reason.startswith(drain.REASON_PREFIX)):
            raise exception.GpuNovaExtException(
                'its nova-compute was disabled before the roll-out (%s), '
                'and the roll-out would enable it again: enable it (or '
                'leave the host out with --aggregate), then run again '
                'with --resume' % (reason or 'no reason given'))
        client = self.app.client_manager.gpu
        drain.drain(client.load_conf(args.config_file), client.conn,
                    client.placement, host, service, reason=args.reason,
                    migrate=True, all_servers=args.all_servers,
                    dry_run=False, say=self.say)


def _check_seconds(name: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise exception.InvalidArgument(
            argument=name, value=value,
            reason='give the seconds, more than 0')
