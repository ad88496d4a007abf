# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""``gpu-nova-ext simulate [SCENARIO.yaml] [--format table|json|csv]``.

Plays a scenario (the shipped one without an argument) on an embedded
Placement with Nova's scheduler code and our plugins, and prints where each
server landed and why.  ``--compare`` plays it once per policy, side by
side; ``--plot`` draws GPU allocation against arrived load.  Progress goes
to stderr (a tqdm bar for long runs), the result to stdout.
"""
import logging as std_logging
import sys
import warnings

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import policies
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
    parser.add_argument('--format', choices=('table', 'json', 'csv'),
                        default='table',
                        help='Result as tables (default), JSON, or CSV (one '
                             'row per server).')
    parser.add_argument(
        '--compare', nargs='+', metavar='NAME[=FILE_OR_OVERRIDES]',
        help='Run the scenario once per policy (same hosts, steps, workload '
             'and seed) and compare them.  Presets: %s; NAME=FILE (a YAML '
             'nova_conf fragment) or NAME=group.option=value,...  Every '
             'placement is checked against its flavor\'s gpu: extra specs: '
             'a server on a GPU they do not allow is counted as misplaced.'
             % '; '.join('%s: %s' % (name, policies.DESCRIPTIONS[name])
                         for name in policies.PRESETS))
    parser.add_argument(
        '--plot', metavar='FILE.png',
        help='Draw GPU allocation rate against arrived load, one line per '
             'policy (needs matplotlib: pip install gpu-nova-ext[plot]).')
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


def _bar(total, desc):
    import tqdm
    # disable=None: a bar on a terminal, nothing in a pipe or a log
    return tqdm.tqdm(total=total, desc=desc, file=sys.stderr, disable=None,
                     unit=' ' + desc, leave=False)


def _policies(args, scenario) -> list[tuple[str | None, scn.Scenario]]:
    if not args.compare:
        return [(None, scenario)]
    if len(args.compare) > policies.MAX_POLICIES:
        raise exception.ConfigError(reason='--compare takes at most %d '
                                    'policies' % policies.MAX_POLICIES)
    out = []
    for arg in args.compare:
        try:
            name, overrides, ours = policies.parse(arg)
        except policies.PolicyError as exc:
            raise exception.ConfigError(reason=str(exc))
        if name in [n for n, _ in out]:
            raise exception.ConfigError(reason='--compare: policy %s is '
                                        'given twice' % name)
        out.append((name, policies.apply(scenario, overrides, ours)))
    return out


def _simulate(args) -> int:
    # imported here: Nova and Placement load in about a second
    from gpu_nova_ext.simulate import output
    from gpu_nova_ext.simulate import runner

    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise exception.ConfigError(reason=(
                '--plot needs matplotlib, which is not installed: pip '
                'install "gpu-nova-ext[plot]" (or drop --plot)'))
    scenario = scn.load(args.scenario)
    _progress('scenario %s: %d hosts, %d flavors, %d steps%s' % (
        scenario.path, len(scenario.hosts), len(scenario.flavors),
        len(scenario.steps), ', a workload' if scenario.workload else ''))
    results = []
    for name, variant in _policies(args, scenario):
        progress = _progress if name is None else (
            lambda line, name=name: _progress('%s: %s' % (name, line)))
        results.append(runner.Simulation(variant, progress, _bar,
                                         name=name).run())
    if args.format == 'json':
        print(output.to_json(results))
    elif args.format == 'csv':
        print(output.to_csv(results), end='')
    else:
        print(output.to_table(results))
    if args.plot:
        output.plot(results, args.plot)
        _progress('plot written to %s' % args.plot)
    return 0
