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

"""``gpu-nova-ext rollout plan``: batches for a driver roll-out."""
import argparse
import sys

from oslo_config import cfg

from gpu_nova_ext.cmd import ops_common
from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import rollout


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'rollout', help='Plan a GPU driver roll-out.')
    actions = parser.add_subparsers(dest='rollout_action', metavar='ACTION')
    actions.required = True
    plan = actions.add_parser(
        'plan',
        help='Print the batches in which to upgrade GPU hosts.',
        description=(
            'Batches of GPU hosts to drain, upgrade and undrain one after '
            'the other, so that no GPU model loses more than '
            '--max-unavailable of its GPUs at once.  From the driver view '
            'of gpu-nova-ext audit (Placement).'))
    plan.add_argument('--max-unavailable', required=True, metavar='N%',
                      help='Share of each GPU model that may be out at once '
                           '(25%% or 25).')
    plan.add_argument('--model', metavar='MODEL',
                      help='Only hosts with GPUs of this model (A100 or '
                           'A100_80GB_PCIE).')
    plan.add_argument('--aggregate', metavar='NAME',
                      help="Only the hosts of this Nova host aggregate.")
    plan.add_argument('--target-driver', metavar='BRANCH',
                      help='Leave out hosts whose GPUs run it already.')
    ops_common.add_cloud_arg(plan)
    plan.set_defaults(func=run)


def parse_percent(text: str) -> float:
    try:
        value = float(text.rstrip('%'))
    except ValueError:
        value = -1.0
    if not 0 < value <= 100:
        raise exception.GpuNovaExtException(
            'Invalid --max-unavailable %r: give a percentage above 0 and '
            'at most 100, such as 25%%.' % text)
    return value


def aggregate_hosts(conn, name: str) -> set[str]:
    from gpu_nova_ext.operator import nova_actions
    for agg in nova_actions.call(conn, 'aggregates'):
        if agg.name == name or agg.id == name:
            return set(agg.hosts or ())
    raise exception.GpuNovaExtException(
        'No host aggregate %r in Nova. Give one of openstack aggregate '
        'list.' % name)


def run(args: argparse.Namespace, conf: cfg.ConfigOpts, conn_factory=None,
        placement_factory=None) -> int:
    pct = parse_percent(args.max_unavailable)
    hosts = None
    if args.aggregate:
        conn, placement = ops_common.connections(args, conf, conn_factory,
                                                 placement_factory)
        hosts = aggregate_hosts(conn, args.aggregate)
    else:
        from gpu_nova_ext.placement import client as placement_client
        placement = (placement_factory or placement_client.PlacementClient)(
            conf)
    report = audit.build_report(audit.collect(placement))
    result = rollout.plan(report, pct, hosts=hosts, model=args.model,
                          target_branch=(rollout.branch(args.target_driver)
                                         if args.target_driver else None))
    sys.stdout.write(rollout.render(result))
    return 0
