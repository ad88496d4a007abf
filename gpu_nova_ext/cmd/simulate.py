# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext simulate [SCENARIO.yaml] [-f table|json|yaml|csv|value]``.

Plays a scenario (the shipped one without an argument) on an embedded
Placement with Nova's scheduler code and our plugins, and prints where each
server landed and why.  ``--compare`` plays it once per policy, side by
side, the policies in parallel processes (as many as the CPUs this process
may use); ``--plot`` draws GPU allocation against arrived load.  Progress goes
to stderr (a tqdm bar for long runs), the result to stdout.
"""
import importlib.util
import logging as std_logging
import os
import sys
import warnings

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import nova_conf_file
from gpu_nova_ext.simulate import policies
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext import text_table


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
    text_table.add_arguments(
        parser, document='the whole result (with --compare, one per '
        'policy under "policies")', rows='a row per server (and policy), '
        'then one per remediation move')
    parser.add_argument(
        '--compare', nargs='+', metavar='NAME[=FILE_OR_OVERRIDES]',
        help='Run the scenario once per policy (same hosts, steps, workload '
             'and seed) and compare them.  Presets: %s; NAME=FILE (a YAML '
             'nova_conf fragment) or NAME=group.option=value,..., or the '
             'name of one of the scenario\'s mig_variants (its hosts with '
             'that MIG layout).  Every '
             'placement is checked against its flavor\'s gpu: extra specs: '
             'a server on a GPU they do not allow is counted as misplaced.'
             % '; '.join('%s: %s' % (name, policies.DESCRIPTIONS[name])
                         for name in policies.PRESETS))
    parser.add_argument(
        '--nova-conf', action='append', metavar='FILE',
        help=nova_conf_file.HELP + (' They replace the scenario\'s '
                                    'nova_conf: options, beneath '
                                    '--compare\'s.'))
    parser.add_argument(
        '--seeds', nargs='+', type=int, metavar='SEED',
        help='Run the scenario\'s workload once per seed (with --compare, '
             'every policy per seed) and report the spread: per policy the '
             'min / median / max of the GPU allocation at 50..130%% of '
             'arrived load, the first failed GPU server and the multi-GPU '
             'servers placed, then each seed\'s comparison.  json/yaml: '
             '{"spread", "seeds"}; csv: a seed column first.')
    parser.add_argument(
        '--plot', metavar='FILE.png',
        help='Draw GPU allocation rate against arrived load, one line per '
             'policy (needs matplotlib: pip install gpu-nova-ext[plot]).')
    parser.set_defaults(func=run)


def _progress(line: str) -> None:
    print('[simulate] %s' % line, file=sys.stderr, flush=True)


# What the [simulator] extra installs (module: distribution); a compute
# host or a controller without it gets one line saying so.
SIMULATOR_EXTRA = {'nova': 'nova', 'placement': 'openstack-placement',
                   'tqdm': 'tqdm'}


def check_simulator_installed() -> None:
    missing = [dist for module, dist in SIMULATOR_EXTRA.items()
               if importlib.util.find_spec(module) is None]
    if missing:
        raise exception.GpuNovaExtException(
            'gpu-nova-ext simulate runs Nova and Placement in this process '
            'and needs %s, not installed here: pip install '
            '"gpu-nova-ext[simulator]" (on an admin workstation, not on a '
            'compute host)' % ', '.join(missing))


def run(args, conf) -> int:
    check_simulator_installed()
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
        if arg in scenario.mig_variants:
            # a MIG layout of the scenario's mig_variants: its hosts with
            # that layout, the scenario's own nova.conf
            if arg in policies.PRESETS:
                raise exception.ConfigError(reason=(
                    '--compare %s: both a preset and a MIG variant of %s; '
                    'rename the variant' % (arg, scenario.path)))
            if arg in [n for n, _ in out]:
                raise exception.ConfigError(reason='--compare: policy %s '
                                            'is given twice' % arg)
            out.append((arg, scn.load(scenario.path, mig_variant=arg)))
            continue
        try:
            name, overrides, ours = policies.parse(arg)
        except policies.PolicyError as exc:
            raise exception.ConfigError(reason=str(exc))
        if name in [n for n, _ in out]:
            raise exception.ConfigError(reason='--compare: policy %s is '
                                        'given twice' % name)
        out.append((name, policies.apply(scenario, overrides, ours)))
    return out


def _with_nova_conf(scenario, paths):
    """The scenario with the schedulers' own options (--nova-conf)."""
    taken = nova_conf_file.read(paths)
    scenario = nova_conf_file.apply(scenario, taken)
    for line in nova_conf_file.notes(taken, paths):
        _progress(line)
    if (scenario.quotas and not taken.quotas_off
            and 'driver' not in taken.options.get('quota', {})):
        _progress('--nova-conf: no [quota] driver in these files: the '
                  'scenario\'s quotas: are played as Nova\'s unified '
                  'limits (give nova-api\'s files too to decide)')
    return scenario


def _cores() -> int:
    """The CPUs this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:          # not Linux
        return max(1, os.cpu_count() or 1)


def _run_policy(name, variant, bar=None):
    """One policy's run (in this process or a worker)."""
    from gpu_nova_ext.simulate import runner
    progress = _progress if name is None else (
        lambda line: _progress('%s: %s' % (name, line)))
    return runner.Simulation(variant, progress, bar, name=name).run()


def _run_parallel(variants, workers: int) -> list:
    """``--compare``'s policies in worker processes, results in order.

    Each policy is a separate simulation (its own embedded Placement, whose
    database and policy enforcer are process globals), so processes, not
    threads; forked, they inherit the loaded Nova and the logging set-up.
    Progress lines keep their policy prefix; no progress bars.
    """
    from concurrent import futures
    import multiprocessing
    ctx = multiprocessing.get_context('fork')
    with futures.ProcessPoolExecutor(max_workers=workers,
                                     mp_context=ctx) as pool:
        jobs = [pool.submit(_run_policy, name, variant)
                for name, variant in variants]
        return [job.result() for job in jobs]


def _simulate(args) -> int:
    # imported here: Nova and Placement load in about a second
    from gpu_nova_ext.simulate import output
    from gpu_nova_ext.simulate import runner  # noqa: F401 (before a fork)

    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise exception.ConfigError(reason=(
                '--plot needs matplotlib, which is not installed: pip '
                'install "gpu-nova-ext[plot]" (or drop --plot)'))
    # a -c typo is said before the run, not after it
    text_table.Listing(columns=output.CSV_FIELDS + output.CSV_MOVE_FIELDS,
                       rows=()).select(args.columns)
    scenario = scn.load(args.scenario)
    _progress('scenario %s: %d hosts, %d flavors, %d steps%s' % (
        scenario.path, len(scenario.hosts), len(scenario.flavors),
        len(scenario.steps), ', a workload' if scenario.workload else ''))
    if args.nova_conf:
        scenario = _with_nova_conf(scenario, args.nova_conf)
    variants = _policies(args, scenario)
    if args.seeds:
        variants = [(name, scn.with_seed(variant, seed))
                    for seed in args.seeds for name, variant in variants]
    workers = min(len(variants), _cores())
    if workers > 1:
        _progress('%d policies in %d parallel processes' % (
            len(variants), workers))
        results = _run_parallel(variants, workers)
    else:
        results = [_run_policy(name, variant, _bar)
                   for name, variant in variants]
    if args.seeds:
        runs: dict[int, list] = {}
        for (_, variant), result in zip(variants, results):
            runs.setdefault(variant.workload.seed, []).append(result)
        text_table.emit(args, output.seeds_listing(runs))
        # the first seed's curves
        results = runs[args.seeds[0]]
    else:
        text_table.emit(args, output.listing(results))
    if args.plot:
        output.plot(results, args.plot)
        _progress('plot written to %s' % args.plot)
    return 0
