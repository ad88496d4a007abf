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

"""``gpu-nova-ext mig plan``: what ``[mig] layouts`` would change here.

Run on a compute host with the agent's configuration.  One row per GPU of
a model with a layout: its MIG mode now, the layout and where it came
from (``[mig] host_layouts`` for this host, ``aggregate_layouts`` for one
of its Placement aggregates, or the model's ``layouts``), the steps the agent
would take (enable MIG mode, destroy / create GPU instances) and why it
cannot take them now (allocations in Placement, a server in libvirt,
whole-GPU passthrough, a pending GPU reset).  Changes nothing (the
Placement cycle it runs is a dry run).
"""
import json
import sys

from gpu_nova_ext import exception


def register(subparsers):
    parser = subparsers.add_parser(
        'mig', help="MIG layouts of this host's GPUs ([mig] layouts).")
    sub = parser.add_subparsers(dest='mig_command', metavar='ACTION')
    sub.required = True
    plan = sub.add_parser(
        'plan', help='Show what the agent would change to apply [mig] '
                     'layouts here, and what it cannot change now.')
    plan.add_argument('--format', choices=('table', 'json'),
                      default='table', help='Output format.')
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


def format_table(host, data, warnings) -> str:
    lines = ['Host %s: %d GPU(s) with a MIG layout' % (host, len(data))]
    for row in data:
        lines.append('%s  %s  MIG %s  layout %s (from %s)' % (
            row['gpu'], row['model'], row['mig_mode'], row['layout'] or '-',
            row['layout_source'] or 'nowhere'))
        if row['in_line']:
            lines.append('    in line (instances: %s)' % ', '.join(
                row['instances']))
        for step in row['would']:
            lines.append('    would %s' % step)
        for why in row['cannot']:
            lines.append('    cannot: %s' % why)
    for warning in warnings:
        lines.append('warning: %s' % warning)
    return '\n'.join(lines) + '\n'


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
    data = rows(agent.mig.last)
    if args.format == 'json':
        json.dump({'host': inventory.host, 'gpus': data,
                   'warnings': warnings}, sys.stdout, indent=2,
                  sort_keys=True)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(format_table(inventory.host, data, warnings))
    return 0
