"""Render a simulation result as text tables or as JSON."""
import json

from gpu_nova_ext.simulate import runner

# Weight differences smaller than this are left out of the table (the
# JSON has every weigher's score).
SHOWN_WEIGHT = 0.005
MAX_WEIGHTS_SHOWN = 4


def to_json(result: runner.Result) -> str:
    return json.dumps(result.to_dict(), indent=2, sort_keys=False)


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))

    def line(cells):
        return '  '.join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return ([line(headers), line(['-' * w for w in widths])] +
            [line(row) for row in rows])


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


def to_table(result: runner.Result) -> str:
    out = []
    scenario = result.scenario
    out.append('Scenario: %s' % scenario.path)
    if scenario.description:
        out.append(scenario.description)
    out.append('')
    events = {e.step: e for e in result.events}
    rows = []
    last_step = -1
    for server in result.servers:
        for step in sorted(events):
            if last_step < step < server.step:
                rows.append(_event_row(events.pop(step)))
        last_step = server.step
        if server.error:
            rows.append([server.server, server.flavor, '-', '-',
                         'ERROR: ' + server.error])
        else:
            rows.append([server.server, server.flavor, server.host,
                         ', '.join(server.gpus) or '-',
                         _why(server)])
    for step in sorted(events):
        rows.append(_event_row(events[step]))
    out += _table(['SERVER', 'FLAVOR', 'HOST', 'GPU',
                   'WHY THIS HOST (weight differences to the next best)'],
                  rows)
    out.append('')
    occ_rows = [[o.host, o.gpu, o.model or '-', o.mode or '-',
                 '%d/%d' % (o.used, o.total), o.health or '-']
                for o in result.occupancy]
    out += _table(['HOST', 'GPU', 'MODEL', 'MODE', 'USED', 'HEALTH'],
                  occ_rows)
    return '\n'.join(out)


def _event_row(event: runner.EventResult) -> list[str]:
    what = []
    if event.health:
        what.append('health -> %s' % event.health)
    what += ['%s -> %s' % kv for kv in event.metrics.items()]
    return ['** event', '', event.host, event.gpu, ', '.join(what)]
