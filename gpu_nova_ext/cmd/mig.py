# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext mig plan``: what ``[mig] layouts`` would change here.

Run on a compute host with the agent's configuration.  One row per GPU of
a model with a layout: its MIG mode now, the layout and where it came
from (``[mig] host_layouts`` for this host, ``aggregate_layouts`` for one
of its Placement aggregates, or the model's ``layouts``), the steps the agent
would take (enable MIG mode, destroy / create GPU instances) and why it
cannot take them now (allocations in Placement, a server in libvirt,
whole-GPU passthrough, a pending GPU reset).  Changes nothing (the
Placement cycle it runs is a dry run).  Output: ``-f table|json|yaml|csv|
value`` and ``-c COLUMN`` (:mod:`gpu_nova_ext.text_table`); the table
lists under each GPU its instances, the steps and why not.
"""
from gpu_nova_ext import exception
from gpu_nova_ext import text_table


def register(subparsers):
    parser = subparsers.add_parser(
        'mig', help="MIG layouts of this host's GPUs ([mig] layouts).")
    sub = parser.add_subparsers(dest='mig_command', metavar='ACTION')
    sub.required = True
    plan = sub.add_parser(
        'plan', help='Show what the agent would change to apply [mig] '
                     'layouts here, and what it cannot change now.')
    text_table.add_arguments(
        plan, document='{"host", "gpus": [per GPU: its columns and '
        'instances, in_line, would, cannot], "warnings"}',
        rows='a row per GPU (warnings on stderr)')
    plan.set_defaults(func=run_plan)


def _mode(state) -> str:
    if state.current is None:
        return 'not capable'
    if state.current:
        return 'enabled'
    return 'pending enable' if state.pending else 'disabled'


def rows(outcomes) -> list[dict]:
    result = []
    for outcome in outcomes:
        plan = outcome.plan
        steps = plan.describe_steps()
        result.append({
            'gpu': plan.pci_address, 'model': plan.model,
            'mig_mode': _mode(outcome.state),
            'layout': plan.layout.describe() if plan.layout else None,
            'layout_source': plan.source,
            'instances': sorted('%s@%d' % (n, s)
                                for n, s, _h in outcome.state.instances),
            'in_line': plan.in_line and plan.layout is not None,
            'would': [] if plan.blocked else steps,
            # no layout chosen (aggregates unknown or in conflict): why
            'cannot': (['%s (would %s)' % (why, ', '.join(steps))
                        for why in plan.blocked] if plan.blocked and steps
                       else list(plan.blocked) if plan.layout is None
                       else []) + list(plan.pending)})
    return result


#: the table's columns: the keys of :func:`rows` with a single value
COLUMNS = ('gpu', 'model', 'mig_mode', 'layout', 'layout_source')


def listing(host, data, warnings) -> text_table.Listing:
    """A row per GPU; under it in the table: what would change, why not."""
    details = []
    for row in data:
        subs = []
        if row['in_line']:
            subs.append(['in line (instances: %s)' % ', '.join(
                row['instances'])])
        subs += [['would %s' % step] for step in row['would']]
        subs += [['cannot: %s' % why] for why in row['cannot']]
        details.append(subs)
    return text_table.Listing(
        columns=COLUMNS, rows=[[row[c] for c in COLUMNS] for row in data],
        details=details,
        title=['Host %s: %d GPU(s) with a MIG layout' % (host, len(data))],
        messages=['warning: %s' % w for w in warnings],
        document={'host': host, 'gpus': data, 'warnings': warnings})


def run_plan(args, conf) -> int:
    from gpu_nova_ext.agent import service
    from gpu_nova_ext.inventory import manager

    agent = service.AgentService(conf)
    warnings = []
    if not agent.mig.active:
        warnings.append('[mig] layouts is empty: nothing to plan')
    agent.reporter.log_changes = False
    client = agent.client
    try:
        agent.run_cycle(dry_run=True, cast=False)
        inventory = agent.last_inventory
    except exception.GpuNovaExtException as exc:
        warnings.append('Placement: %s; allocations unknown, so no GPU '
                        'would be laid out' % exc.format_message())
        inventory = manager.discover(conf)
        client = None
    if client is not None:
        agent.refresh_aggregates()
        if agent.mig.needs_aggregates and agent.mig.aggregates is None:
            warnings.append('the host\'s aggregates could not be read from '
                            'Placement: [mig] aggregate_layouts are not '
                            'applied')
    agent.mig.cycle(inventory, client, apply=False)
    if agent.mig.servers() is None:
        warnings.append('libvirt at %s could not be read: servers unknown, '
                        'so no GPU would be laid out' %
                        conf.agent.libvirt_uri)
    text_table.emit(args, listing(inventory.host, rows(agent.mig.last),
                                  warnings))
    return 0
