# SPDX-License-Identifier: Apache-2.0

"""Render simulation results: text tables, JSON, CSV, a plot.

One result (``gpu-nova-ext simulate``) or several side by side
(``--compare``).  :func:`listing` is what ``-f``/``-c`` print (through
:mod:`gpu_nova_ext.text_table`, as every ``gpu-nova-ext`` command):
the report of :func:`to_table`, the document of :func:`document`, or the
rows of :func:`rows`.  Long runs keep the table readable: per-server and
per-GPU rows are shown up to :data:`MAX_ROWS`, the summary always.
"""
import statistics

from gpu_nova_ext.simulate import metrics as runner_metrics
from gpu_nova_ext.simulate import misplaced
from gpu_nova_ext.simulate import quotas
from gpu_nova_ext.simulate import reservations
from gpu_nova_ext.simulate import result as runner
from gpu_nova_ext import text_table

# Weight differences smaller than this are left out of the table (the
# JSON has every weigher's score).
SHOWN_WEIGHT = 0.005
MAX_WEIGHTS_SHOWN = 4
#: Per-server and per-GPU rows shown in the table (all are in JSON/CSV).
MAX_ROWS = 200


def document(results: list[runner.Result]) -> dict:
    """What ``-f json`` and ``-f yaml`` print (in the results' order)."""
    if len(results) == 1:
        return results[0].to_dict()
    return {'policies': [r.to_dict() for r in results]}


def to_json(results: list[runner.Result]) -> str:
    """Strict JSON: NaN or infinity raise instead of being written."""
    return text_table.to_json(document(results), sort_keys=False)


def listing(results: list[runner.Result]) -> text_table.Listing:
    columns, data = rows(results)
    return text_table.Listing(
        columns=columns, rows=data, document=document(results),
        sort_keys=False, report=lambda: to_table(results))


CSV_FIELDS = ('policy', 'server', 'flavor', 'host', 'gpus', 'error',
              'arrived_pct', 'misplaced', 'gpu_allocation_pct')
#: with ``remediation:`` or a ``rollout:`` step, a row per move follows
#: the servers' rows
CSV_MOVE_FIELDS = ('record', 'step', 'from_host', 'from_gpus', 'action',
                   'outcome')
#: with a ``rollout:`` step, a row per wave follows
CSV_WAVE_FIELDS = ('wave', 'wave_hosts', 'peak_out_pct', 'moved', 'staying',
                   'failed_boots')


def rows(results: list[runner.Result]) -> tuple[tuple, list[list]]:
    """One row per server (and policy); then one per move; one per wave.

    With ``remediation:`` or a ``rollout:`` step the rows gain a
    ``record`` column (``boot``, ``move`` or ``wave``); a move's
    ``host``/``gpus`` are where the server went and its ``error`` why it
    did not move.  A roll-out adds its moves and a row per wave (its
    ``step`` the step it started at; ``peak_out_pct`` per pool,
    ``POOL=PCT`` joined by ``;``, ``staying`` ``SERVER: WHY`` joined by
    ``;``).  None where a row has no value (csv writes nothing, the table
    and ``value`` a ``-``).  A server's ``gpu_allocation_pct`` is the
    cloud's after its boot: with ``arrived_pct`` the curve of ``--plot``.

    :returns: the columns and the rows.
    """
    waves = any(r.rollout is not None for r in results)
    moves = waves or any(r.moves is not None for r in results)
    wave_pad = [None] * len(CSV_WAVE_FIELDS) if waves else []
    out = []
    for result in results:
        # result.curve has a point per server, in order
        after = [p[1] for p in result.curve]
        for i, s in enumerate(result.servers):
            out.append([result.policy, s.server, s.flavor, s.host,
                        ' '.join(s.gpus) or None, s.error or None,
                        '%.2f' % s.arrived_pct, s.misplaced or None,
                        '%.2f' % after[i] if i < len(after) else None] +
                       (['boot'] + [None] * 5 if moves else []) + wave_pad)
        flavors = {s.server: s.flavor for s in result.servers}
        rollout = result.rollout
        for m in (result.moves or []) + (rollout.moves if rollout else []):
            out.append([
                result.policy, m.server, flavors.get(m.server),
                m.to_host, ' '.join(m.to_gpus) or None,
                None if m.outcome == 'moved' else m.why(), None, None,
                None, 'move', str(m.step), m.host, ' '.join(m.gpus) or None,
                m.action, m.outcome] + wave_pad)
        for w in rollout.waves if rollout else []:
            out.append([result.policy] + [None] * (len(CSV_FIELDS) - 1) + [
                'wave', None if w.started is None else str(w.started)] +
                [None] * (len(CSV_MOVE_FIELDS) - 2) + [
                str(w.number), ' '.join(w.hosts),
                ';'.join('%s=%.2f' % (p, runner.pct(
                    n, rollout.totals.get(p, 0)))
                    for p, n in sorted(w.peak_out.items())) or None,
                str(len(w.moved)),
                ';'.join('%s: %s' % kv for kv in w.staying.items())
                or None, str(len(w.failed_boots))])
    return (CSV_FIELDS + (CSV_MOVE_FIELDS if moves else ()) +
            (CSV_WAVE_FIELDS if waves else ())), out


def to_csv(results: list[runner.Result]) -> str:
    """:func:`rows` as ``-f csv`` prints them."""
    return text_table.to_csv(*rows(results))


def _why(server: runner.ServerResult) -> str:
    why = _weighers(server)
    for name, gpus in sorted(server.excluded.items()):
        why += '; %s excluded %s' % (name.replace('Filter', ''),
                                     ', '.join(gpus))
    return why


def _weighers(server: runner.ServerResult) -> str:
    """The weighers that put the host ahead of the next best one.

    Per weigher, the winner's score (multiplier x normalized weight) minus
    the runner-up's, largest first.
    """
    if server.runner_up is None:
        return 'only host left after Placement and the filters'
    diff = {}
    for name in set(server.weights) | set(server.runner_up_weights):
        delta = (server.weights.get(name, 0.0) -
                 server.runner_up_weights.get(name, 0.0))
        if abs(delta) >= SHOWN_WEIGHT:
            diff[name] = delta
    if not diff:
        return 'tie with %s' % server.runner_up
    shown = sorted(diff.items(), key=lambda kv: -abs(kv[1]))
    parts = ['%s %+.2f' % (name.replace('Weigher', ''), value)
             for name, value in shown[:MAX_WEIGHTS_SHOWN]]
    if len(shown) > MAX_WEIGHTS_SHOWN:
        parts.append('...')
    return 'vs %s: %s' % (server.runner_up, ', '.join(parts))


def to_table(results: list[runner.Result]) -> str:
    scenario = results[0].scenario
    out = ['Scenario: %s' % scenario.path]
    if scenario.description:
        out.append(scenario.description)
    out.append('')
    if len(results) > 1:
        out += compare_table(results)
        for result in results:
            out += ['', '== policy %s ==' % result.policy]
            moves = _moves(result) + _rollout(result)
            out += moves + ([''] if moves else []) + _missing(result)
            out += _misplaced(result)
            out += _summary(result)
        return '\n'.join(out)
    result = results[0]
    if len(result.servers) <= MAX_ROWS:
        out += _servers(result) + _moves(result) + ['']
    else:
        out += ['%d servers: per-server rows are in --format json or csv.'
                % len(result.servers)] + _moves(result) + ['']
    rollout = _rollout(result)
    out += rollout[1:] + [''] if rollout else []
    if len(result.occupancy) <= MAX_ROWS:
        out += _occupancy(result)
    else:
        out.append('%d GPUs: per-GPU rows are in --format json.'
                   % len(result.occupancy))
    out += (_missing(result) + _misplaced(result) +
            reservations.table(result)
            + quotas.table(result.quotas or []))
    if scenario.workload is not None or len(result.servers) > MAX_ROWS:
        out += [''] + _summary(result)
    return '\n'.join(out)


def _missing(result: runner.Result) -> list[str]:
    """Hosts the GPU filters excluded for missing state: never silent."""
    missing = result.missing_state
    stale = sorted({o.host for o in result.occupancy
                    if o.state != 'live'})
    out = []
    if missing:
        names = sorted(missing)
        out += ['', 'WARNING: %d host(s) had no live GPU state in the '
                'scheduler when Placement offered them (the GPU filters '
                'judge such hosts by [gpu_scheduler] missing_state_policy): '
                '%s%s' % (
                    len(names), ', '.join(names[:20]),
                    ', ...' if len(names) > 20 else '')]
    if stale:
        out += ['', 'WARNING: %d host(s) have no live GPU state at the end '
                '(agent down): %s%s' % (len(stale), ', '.join(stale[:20]),
                                        ', ...' if len(stale) > 20 else '')]
    return out


def _misplaced(result: runner.Result) -> list[str]:
    """Servers on a GPU their flavor did not ask for: never silent."""
    line = misplaced.warning(None, result.servers)
    return ['', line] if line else []


def _summary(result: runner.Result) -> list[str]:
    s = result.summary
    first = s.get('first_gpu_failure')
    rows = [
        ['servers placed / misplaced / failed / deleted',
         '%d / %d / %d / %d' % (
             s['servers_placed'], s['servers_misplaced'],
             s['servers_failed'], s['servers_deleted'])],
    ] + ([['servers refused by quota', str(s['servers_refused_by_quota'])]]
         if s.get('servers_refused_by_quota') else []) + [
        ['GPU allocation rate (misplaced incl.)',
         '%.1f%% of %d GPUs on %d hosts' % (
             s['gpu_allocation_pct'], s['gpus'], s['hosts'])],
        ['GPU allocation rate (misplaced excl.)', '%.1f%%' % (
            s['gpu_allocation_pct_without_misplaced'])],
        ['arrived load', '%.1f%%' % s['arrived_pct']],
        ['first GPU failure', 'none' if first is None else
         '%s at %.1f%% arrived, %.1f%% allocated, %.1f%% fragmented' % (
             first['server'], first['arrived_pct'],
             first['gpu_allocation_pct'], first['fragmentation_pct'])],
        ['fragmentation', '%.1f%% of free GPU capacity unusable by the '
         'flavor mix' % s['fragmentation_pct']],
        ['fully free GPU hosts', str(s['fully_free_gpu_hosts'])],
        ['multi-GPU servers / not in one NVLink domain / across NUMA',
         _multi(s)],
    ]
    rows += [['usage %s' % model, '%.1f%% of %d GPUs' % (
        u['allocation_pct'], u['gpus'])]
        for model, u in s['usage_by_model'].items()]
    if result.stop_reason:
        rows.append(['stopped', result.stop_reason])
    return text_table.lines(['SUMMARY', ''], rows)


def _multi(summary: dict) -> str:
    return '%d / %d / %d' % (summary['multi_gpu_servers'],
                             summary['multi_gpu_not_in_one_link_domain'],
                             summary['multi_gpu_across_numa_nodes'])


def compare_table(results: list[runner.Result]) -> list[str]:
    """The policies side by side, one column each."""
    def first(r, key):
        f = r.summary.get('first_gpu_failure')
        return '-' if f is None else '%.1f%%' % f[key]

    def multi(r):
        return '%d of %d' % (r.summary['multi_gpu_servers'],
                             r.summary.get('multi_gpu_arrived', 0))

    rows = [
        ['placed', [str(r.summary['servers_placed']) for r in results]],
        ['misplaced (wrong GPU)', [str(r.summary['servers_misplaced'])
                                   for r in results]],
        ['failed', [str(r.summary['servers_failed']) for r in results]],
        ['GPU allocation (misplaced incl.)', [
            '%.1f%%' % r.summary['gpu_allocation_pct'] for r in results]],
        ['GPU allocation (misplaced excl.)', [
            '%.1f%%' % r.summary['gpu_allocation_pct_without_misplaced']
            for r in results]],
        ['arrived at 1st GPU failure', [first(r, 'arrived_pct')
                                        for r in results]],
        ['allocation at 1st GPU failure', [first(r, 'gpu_allocation_pct')
                                           for r in results]],
    ] + [
        ['GPU allocation at %d%% arrived' % point['arrived_pct'], [
            _pct_cell(r.summary['allocation_at'][i]['gpu_allocation_pct'])
            for r in results]]
        for i, point in enumerate(results[0].summary['allocation_at'])
    ] + [
        ['multi-GPU servers placed of arrived', [multi(r)
                                                 for r in results]],
        ['fragmentation', ['%.1f%%' % r.summary['fragmentation_pct']
                           for r in results]],
        ['fully free GPU hosts', [str(r.summary['fully_free_gpu_hosts'])
                                  for r in results]],
        ['multi-GPU servers / not in one NVLink domain / across NUMA', [
            _multi(r.summary) for r in results]],
        ['hosts missing state', [str(r.summary['hosts_missing_state'])
                                 for r in results]],
    ]
    models = sorted({m for r in results
                     for m in r.summary['usage_by_model']})
    for model in models:
        rows.append(['usage %s' % model, [
            '%.1f%%' % r.summary['usage_by_model'].get(model, {}).get(
                'allocation_pct', 0.0) for r in results]])
    return text_table.lines(['POLICY'] + [r.policy for r in results],
                            [[name] + cells for name, cells in rows])


def _pct_cell(value: float | None) -> str:
    return '-' if value is None else '%.1f%%' % value


def _spread_figures(result: runner.Result) -> dict[str, float | None]:
    summary = result.summary
    first = summary.get('first_gpu_failure')
    out = {'gpu_allocation_at_%d' % p['arrived_pct']:
           p['gpu_allocation_pct'] for p in summary['allocation_at']}
    # no failure: every GPU server arrived was placed
    out['first_gpu_failure_arrived'] = (
        summary['arrived_pct'] if first is None else first['arrived_pct'])
    out['multi_gpu_placed'] = summary['multi_gpu_servers']
    out['multi_gpu_arrived'] = summary['multi_gpu_arrived']
    return out


def spread(runs: dict[int, list[runner.Result]]) -> dict[str, dict]:
    """Policy -> figure -> min, median and max over the seeds' runs.

    ``runs``: seed -> that seed's results (the same policies in the same
    order).  The median with the extremes, not a mean and deviation: a
    few seeds, and one bad seed is what an operator wants to see.
    """
    by_policy: dict[str, dict[str, list]] = {}
    for results in runs.values():
        for result in results:
            figures = by_policy.setdefault(result.policy or 'scenario', {})
            for name, value in _spread_figures(result).items():
                figures.setdefault(name, []).append(value)
    out: dict[str, dict] = {}
    for policy, figures in by_policy.items():
        out[policy] = {}
        for name, values in figures.items():
            known = sorted(v for v in values if v is not None)
            out[policy][name] = None if not known else {
                'min': known[0], 'median': statistics.median(known),
                'max': known[-1]}
    return out


def spread_table(runs: dict[int, list[runner.Result]]) -> list[str]:
    """:func:`spread` as a table: a row per figure, a column per policy."""
    figures = spread(runs)
    policies = list(figures)
    names = list(figures[policies[0]])

    def cell(entry, name):
        if entry is None:
            return '-'
        fmt = '%d' if name.startswith('multi') else '%.1f'
        return ' / '.join(fmt % entry[k] for k in ('min', 'median', 'max'))

    rows = [[name] + [cell(figures[p].get(name), name) for p in policies]
            for name in names]
    return ['%d seeds (%s): min / median / max' % (
        len(runs), ', '.join(str(s) for s in runs)), ''] + text_table.lines(
            ['FIGURE'] + policies, rows)


def seeds_listing(runs: dict[int, list[runner.Result]]
                  ) -> text_table.Listing:
    """What ``--seeds`` prints: the spread, then each seed's comparison.

    JSON/YAML: ``{"spread": ..., "seeds": {seed: document}}``; CSV: the
    rows of :func:`rows` with a ``seed`` column first.
    """
    columns, data = None, []
    for seed, results in runs.items():
        columns, seed_rows = rows(results)
        data += [[seed] + row for row in seed_rows]

    def report():
        out = spread_table(runs)
        for seed, results in runs.items():
            out += ['', '== seed %d ==' % seed] + compare_table(results)
        return '\n'.join(out)
    return text_table.Listing(
        columns=('seed',) + columns, rows=data, sort_keys=False,
        document={'spread': spread(runs), 'seeds': {
            str(seed): document(results) for seed, results in runs.items()}},
        report=report)


def plot(results: list[runner.Result], path: str) -> None:
    """GPU allocation rate against arrived load, one line per policy.

    A policy with misplaced servers gets a dashed line of its allocation
    without them, and an ``x`` where each misplaced server landed; a dot
    marks each policy's first failed GPU server.
    """
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot
    from matplotlib import ticker
    fig, ax = pyplot.subplots(figsize=(7, 4.5))
    for result in results:
        name = result.policy or 'scenario'
        xs = [p[0] for p in result.curve]
        ys = [p[1] for p in result.curve]
        first = result.summary.get('first_gpu_failure')
        line, = ax.plot(xs, ys, label='%s (first failure at %s arrived)' % (
            name, _pct_cell(first and first['arrived_pct'])))
        if first:
            ax.plot([first['arrived_pct']], [first['gpu_allocation_pct']],
                    'o', color=line.get_color())
        if not result.summary.get('servers_misplaced'):
            continue
        ax.plot(xs, [p[2] for p in result.curve], linestyle='--',
                color=line.get_color(),
                label='%s without misplaced servers' % name)
        # result.curve has a point per server, in order
        bad = [p for s, p in zip(result.servers, result.curve)
               if s.misplaced]
        ax.plot([p[0] for p in bad], [p[1] for p in bad], 'x',
                color=line.get_color(),
                label='%s: misplaced server (%d)' % (name, len(bad)))
    ax.set_xlabel('arrived load (% of GPU capacity requested)')
    ax.set_ylabel('GPU allocation rate (%)')
    # 101: a policy at 100 % stays in view
    ax.set_ylim(0, 101)
    ax.xaxis.set_major_locator(ticker.MultipleLocator(
        runner_metrics.CURVE_PCT[1] - runner_metrics.CURVE_PCT[0]))
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    pyplot.close(fig)


def _servers(result: runner.Result) -> list[str]:
    out = []
    events: dict[int, list] = {}
    for event in result.events:
        events.setdefault(event.step, []).append(event)
    rows = []
    last_step = -1
    for server in result.servers:
        for step in sorted(events):
            if last_step < step <= server.step:
                rows += [_event_row(e) for e in events.pop(step)]
        last_step = server.step
        if server.error:
            rows.append([server.server, server.flavor, '-', '-',
                         ('REFUSED: ' if server.quota else 'ERROR: ')
                         + server.error])
        else:
            rows.append([server.server, server.flavor, server.host,
                         ', '.join(server.gpus) or '-',
                         ('MISPLACED: %s; ' % server.misplaced
                          if server.misplaced else '') + _why(server)])
    for step in sorted(events):
        rows += [_event_row(e) for e in events[step]]
    out += text_table.lines(
        ['SERVER', 'FLAVOR', 'HOST', 'GPU',
         'WHY THIS HOST (weight differences to the next best)'], rows)
    return out


def _moves(result: runner.Result) -> list[str]:
    """Remediation's table: where each server of an unhealthy GPU went."""
    if result.moves is None:
        return []
    if not result.moves:
        return ['', 'REMEDIATION: no GPU with servers turned unhealthy']
    rows = [[m.server, m.host, ', '.join(m.gpus) or '-',
             m.to_host or '-', ', '.join(m.to_gpus) or '-',
             m.action if m.outcome == 'moved' else
             '%s: %s' % (m.outcome.upper(), m.why())]
            for m in result.moves]
    return [''] + text_table.lines(
        ['MOVED SERVER', 'FROM HOST', 'FROM GPU', 'TO HOST', 'TO GPU',
         'HOW, OR WHY NOT'], rows)


def _rollout(result: runner.Result) -> list[str]:
    """A ``rollout:`` step's waves and totals (an empty line first)."""
    r = result.rollout
    if r is None:
        return []
    rows, details = [], []
    for w in r.waves:
        steps = ('not started' if w.started is None else '%d-%s' % (
            w.started, '' if w.ended is None else w.ended))
        rows.append([str(w.number), str(len(w.hosts)), steps,
                     str(len(w.moved)), str(len(w.staying)),
                     str(len(w.failed_boots))])
        details.append(
            [['hosts', ', '.join(w.hosts)]] +
            [['out', '%s %s' % (p, _out(n, r.totals.get(p, 0)))]
             for p, n in sorted(w.peak_out.items())] +
            [['stays', '%s: %s' % kv] for kv in w.staying.items()] +
            [['left', '%s: %s' % kv] for kv in sorted(w.left.items())])
    head = ['', 'ROLL-OUT to driver %s, at most %g%% of each GPU pool out '
            '(step %d)' % (r.driver, r.max_unavailable, r.started)]
    totals = [['peak out %s' % p, '%s, at most %d' % (
        _out(n, r.totals.get(p, 0)), r.allowed.get(p, 0))]
        for p, n in sorted(r.peak_out.items())] + [
        ['failed boots during the roll-out', str(r.failed_boots)],
        ['servers moved / staying', '%d / %d' % (
            sum(len(w.moved) for w in r.waves),
            sum(len(w.staying) for w in r.waves))],
        ['hosts upgraded', '%d of %d' % (
            len(r.upgraded), sum(len(w.hosts) for w in r.waves))],
        ['finished' if r.stopped is None else 'stopped',
         'at step %s' % r.finished if r.stopped is None else r.stopped]]
    totals += [['already on the driver', ', '.join(r.done)]] if r.done else []
    totals += [['note', n] for n in r.notes]
    return head + text_table.lines(
        ['WAVE', 'HOSTS', 'STEPS', 'MOVED', 'STAYING', 'FAILED BOOTS'],
        rows, details) + [''] + text_table.lines(
            ['ROLL-OUT TOTALS', ''], totals)


def _out(n: int, total: int) -> str:
    """``16 of 64 (25.0%)``: capacity out of a pool."""
    return '%d of %d (%.1f%%)' % (n, total, runner.pct(n, total))


def _occupancy(result: runner.Result) -> list[str]:
    occ_rows = [[o.host, o.gpu, o.model or '-', o.mode or '-',
                 '%d/%d' % (o.used, o.total), o.health or '-']
                for o in result.occupancy]
    return text_table.lines(['HOST', 'GPU', 'MODEL', 'MODE', 'USED', 'HEALTH'],
                            occ_rows)


def _event_row(event: runner.EventResult) -> list[str]:
    what = event.what
    if not what:
        parts = (['health -> %s' % event.health] if event.health else [])
        what = ', '.join(parts + ['%s -> %s' % kv
                                  for kv in event.metrics.items()])
    return ['** event', '', event.host, event.gpu or '-', what]
