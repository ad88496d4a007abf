"""``gpu-nova-ext simulate [SCENARIO.yaml] [--format table|json]``.

Plays a scenario (the shipped one without an argument) on an embedded
Placement with Nova's scheduler code and our plugins, and prints where each
server landed and why.  Progress goes to stderr, the result to stdout.
"""
import logging as std_logging
import sys
import warnings

from gpu_nova_ext.simulate import scenario as scn


def register(subparsers):
    parser = subparsers.add_parser(
        'simulate',
        help='See where GPU servers land and why: a scenario of hosts, '
             'flavors, boots and GPU events played on an embedded '
             'Placement with Nova\'s scheduler and the gpu plugins.',
        description='Without SCENARIO, runs the shipped scenario (%s). The '
                    'format is documented in %s.' % (
                        scn.DEFAULT_SCENARIO,
                        scn.SCENARIO_DIR + '/example.yaml'))
    parser.add_argument('scenario', nargs='?', metavar='SCENARIO.yaml',
                        help='Scenario file (default: the shipped one).')
    parser.add_argument('--format', choices=('table', 'json'),
                        default='table',
                        help='Result as tables (default) or JSON.')
    parser.set_defaults(func=run)


def _progress(line: str) -> None:
    print('[simulate] %s' % line, file=sys.stderr, flush=True)


def run(args, conf) -> int:
    root = std_logging.getLogger()
    level = root.level
    with warnings.catch_warnings():
        if not conf.debug:
            # Nova, Placement and the agent log each step at INFO; the
            # progress lines say what matters here.
            root.setLevel(std_logging.WARNING)
            # the embedded Placement warns when the agent reserves an
            # unhealthy GPU that a server still uses: expected here
            std_logging.getLogger('placement').setLevel(std_logging.ERROR)
            warnings.simplefilter('ignore', DeprecationWarning)
            # futurist imports eventlet, which warns that it is
            # deprecated; nothing here uses eventlet
            warnings.filterwarnings('ignore',
                                    message=r'\s*Eventlet is deprecated')
        try:
            return _simulate(args)
        finally:
            root.setLevel(level)


def _simulate(args) -> int:
    # imported here: Nova and Placement load in about a second
    from gpu_nova_ext.simulate import output
    from gpu_nova_ext.simulate import runner

    scenario = scn.load(args.scenario)
    _progress('scenario %s: %d hosts, %d flavors, %d steps' % (
        scenario.path, len(scenario.hosts), len(scenario.flavors),
        len(scenario.steps)))
    result = runner.Simulation(scenario, _progress).run()
    if args.format == 'json':
        print(output.to_json(result))
    else:
        print(output.to_table(result))
    return 0
