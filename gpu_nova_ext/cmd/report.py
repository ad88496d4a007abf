"""``gpu-nova-ext report --once``: one agent cycle against Placement."""


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
        from gpu_nova_ext.state import rpc
        state_client = rpc.AgentStateClient(conf, on_resend=lambda: None)
    agent = service.AgentService(conf, state_client=state_client)
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
    for warning in result.warnings:
        print('warning: %s' % warning)
    print('%s: %d change(s)%s, %d write request(s); compute node %s (%s), '
          'mode %s' % (
              'dry run' if args.dry_run else 'done', len(result.changes),
              '' if result.changes else ' (Placement is up to date)',
              result.writes, result.nodename, result.root_provider_uuid,
              conf.agent.mode))
    return 0
