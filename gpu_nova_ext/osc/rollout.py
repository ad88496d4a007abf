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

"""``openstack gpu rollout plan``: batches for a driver roll-out.

``-f json`` gives :class:`gpu_nova_ext.operator.rollout.RolloutPlan` as a
dict: ``batches`` (each ``hosts``, ``down`` by pool, ``over_limit``),
``totals`` and ``allowed`` by pool, ``done`` and ``notes``.
"""
import dataclasses

from gpu_nova_ext import exception
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import rollout
from gpu_nova_ext.osc import command


def parse_percent(text: str) -> float:
    try:
        value = float(text.rstrip('%'))
    except ValueError:
        value = -1.0
    if not 0 < value <= 100:
        raise exception.InvalidArgument(
            argument='--max-unavailable', value=text,
            reason='give a percentage above 0 and at most 100, such as 25%')
    return value


class PlanRollout(command.ShowOne):
    """Plan the batches in which to upgrade the GPU hosts' driver.

    Batches of GPU hosts to drain, upgrade and undrain one after the
    other, so that no GPU model loses more than --max-unavailable of its
    GPUs at once; from Placement's view of the GPUs (openstack gpu audit).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument(
            '--max-unavailable', required=True, metavar='<percent>',
            help='Share of each GPU model that may be out at once (25%% '
                 'or 25).')
        command.add_scope_args(parser, 'the hosts')
        parser.add_argument('--target-driver', metavar='<branch>',
                            help='Leave out hosts whose GPUs run it '
                                 'already.')
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        pct = parse_percent(parsed_args.max_unavailable)
        hosts = (nova_actions.aggregate_hosts(client.conn,
                                              parsed_args.aggregate)
                 if parsed_args.aggregate else None)
        report = audit.build_report(audit.collect(client.placement))
        result = rollout.plan(
            report, pct, hosts=hosts, model=parsed_args.model,
            target_branch=(rollout.branch(parsed_args.target_driver)
                           if parsed_args.target_driver else None))
        return command.record(dataclasses.asdict(result))
