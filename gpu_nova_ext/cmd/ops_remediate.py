# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext remediate``: move servers off unhealthy GPUs."""
import argparse
import signal

from oslo_config import cfg

from gpu_nova_ext.cmd import ops_common
from gpu_nova_ext.conf import remediation as remediation_conf
from gpu_nova_ext import exception
from gpu_nova_ext.operator import remediate
from gpu_nova_ext.operator import remediate_daemon
from gpu_nova_ext.operator import remediation_policy as policy


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'remediate',
        help='Move servers off unhealthy GPUs (daemon or --once).',
        description=(
            'Acts on GPUs turning unhealthy: gpu.health.update '
            'notifications (daemon) and a look at the GPU state the '
            "schedulers know ([remediation] sweep_interval, --once).  The "
            'servers on a GPU are the consumers of its allocations in '
            'Placement; [remediation] policy says what to do with them.  '
            'A dry run unless [remediation] enabled or --enable.'))
    parser.add_argument('--once', action='store_true',
                        help='Look once, act, and exit.')
    parser.add_argument('--host', metavar='HOST',
                        help='With --once: only this host (with --gpu, one '
                             'GPU), whatever its health says.')
    parser.add_argument('--gpu', metavar='PCI_ADDRESS',
                        help='With --host: the GPU to act on.')
    parser.add_argument('--reason', default='operator request',
                        help='Reason logged and notified with --host.')
    parser.add_argument('--policy', choices=remediation_conf.POLICIES,
                        help='Override [remediation] policy for this run.')
    parser.add_argument('--enable', action='store_true',
                        help='Act (override [remediation] enabled = False).')
    ops_common.add_cloud_arg(parser)
    parser.set_defaults(func=run)


def sweep_triggers(conf: cfg.ConfigOpts, placement) -> list[policy.Trigger]:
    """The unhealthy GPUs of the cloud (audit with the live GPU state)."""
    from gpu_nova_ext.operator import audit
    from gpu_nova_ext.operator import live_state
    states = live_state.live_states(conf, conf.remediation.state_wait)
    if not states:
        raise exception.GpuNovaExtException(
            'No GPU state heard from the agents within %gs: health is '
            'unknown, so no unhealthy GPU can be found. Set transport_url to '
            "the schedulers' message bus, raise [remediation] state_wait, or "
            'name the GPU with --host and --gpu.'
            % conf.remediation.state_wait)
    report = audit.build_report(audit.collect(placement), states)
    return remediate_daemon.triggers_from_audit(report)


def run(args: argparse.Namespace, conf: cfg.ConfigOpts, conn_factory=None,
        placement_factory=None, sweep=sweep_triggers) -> int:
    if args.gpu and not args.host:
        raise exception.GpuNovaExtException(
            '--gpu %s needs --host: give the host of the GPU.' % args.gpu)
    if args.host and not args.once:
        raise exception.GpuNovaExtException(
            '--host is for one look: add --once.')
    if args.policy:
        conf.set_override('policy', args.policy, group='remediation')
    if args.enable:
        conf.set_override('enabled', True, group='remediation')
    conn, placement = ops_common.connections(args, conf, conn_factory,
                                             placement_factory)
    remediator = remediate.Remediator(conf, conn, placement,
                                      report=ops_common.report)
    if remediator.dry_run:
        ops_common.report('dry run: nothing is moved (set [remediation] '
                          'enabled = True or pass --enable to act)')
    if args.once:
        if args.host:
            triggers = [policy.Trigger(host=args.host, gpu=args.gpu,
                                       reason=args.reason,
                                       source='operator')]
        else:
            triggers = sweep(conf, placement)
            if not triggers:
                ops_common.report('no unhealthy GPU known to the '
                                  'schedulers')
        results = []
        for trigger in triggers:
            results += remediator.run(trigger)
        return ops_common.check_results(results, 'remediation')
    daemon = remediate_daemon.RemediationDaemon(
        conf, remediator, sweep=lambda: sweep(conf, placement))
    daemon.start_listener()

    def _stop(signum, frame):
        daemon.stop()

    signal.signal(signal.SIGTERM, _stop)
    try:
        daemon.run()
    finally:
        daemon.stop()
    return 0
