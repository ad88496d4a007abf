# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext report --once``: one agent cycle against Placement.

Exit status: 0 when Placement is up to date, 1 when a change could not be
applied or a provider was skipped (each named in the output), 2 on bad
input or when Placement cannot be reached.
"""

EXIT_INCOMPLETE = 1


def register(subparsers):
    parser = subparsers.add_parser(
        'report',
        help='Run one agent cycle (discover, report to Placement) and '
             'print what it changed.')
    parser.add_argument(
        '--once', action='store_true',
        help='Run one cycle and exit (what this command always does; the '
             'periodic daemon is gpu-nova-agent).')
    parser.add_argument(
        '--dry-run', action='store_true',
        help='Print what would change in Placement; write nothing.')
    parser.add_argument(
        '--cast', action='store_true',
        help='Also cast the GPU state to the schedulers (needs '
             'transport_url in the configuration).')
    parser.set_defaults(func=run)


def run(args, conf) -> int:
    from gpu_nova_ext.agent import service

    state_client = None
    if args.cast and not args.dry_run:
        # what the daemon casts: protocol 1.1 facts, then metrics
        from gpu_nova_ext.agent import state_client as agent_state
        state_client = agent_state.AgentStateClient(
            conf, on_resend=lambda: None)
    agent = service.AgentService(conf, state_client=state_client)
    # the changes are printed below; the log would say each one again
    agent.reporter.log_changes = False
    try:
        result = agent.run_cycle(dry_run=args.dry_run,
                                 cast=state_client is not None)
    finally:
        if state_client is not None:
            state_client.stop()
    prefix = 'would ' if args.dry_run else ''
    for change in result.changes:
        print('%s%s' % (prefix, change))
    for skipped in result.skipped:
        print('skipped %s' % skipped)
    for failed in result.not_applied:
        print('not applied: %s' % failed)
    for warning in result.warnings:
        print('warning: %s' % warning)
    incomplete = bool(result.not_applied or result.skipped)
    if incomplete:
        summary = ('INCOMPLETE: %d change(s) applied, %d not applied, %d '
                   'provider(s) skipped (see above; Placement is not up to '
                   'date, the agent tries again at its next cycle)' % (
                       len(result.changes), len(result.not_applied),
                       len(result.skipped)))
    else:
        summary = '%s: %d change(s)%s' % (
            'dry run' if args.dry_run else 'done', len(result.changes),
            '' if result.changes else ' (Placement is up to date)')
    print('%s, %d write request(s); compute node %s (%s), mode %s' % (
        summary, result.writes, result.nodename, result.root_provider_uuid,
        conf.agent.mode))
    return EXIT_INCOMPLETE if incomplete else 0
