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

"""[gpu_scheduler] options, read by our filters inside nova-scheduler."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

gpu_scheduler_group = cfg.OptGroup(
    'gpu_scheduler',
    title='GPU scheduler plugin options',
    help='Options of the gpu_nova_ext filters and of the GPU state cache '
         'that runs inside each nova-scheduler process.')

POLICIES = ('pack', 'spread', 'coolest', 'least_loaded')

gpu_scheduler_opts = [
    cfg.FloatOpt(
        'state_ttl',
        default=120.0,
        min=1.0,
        help="""
Seconds after which a host's GPU state (cast by its gpu-nova-agent) counts
as missing.

Related options:

* ``[agent] report_interval`` on the compute hosts must be well below this.
* ``missing_state_policy`` decides hosts without live state.
"""),
    cfg.StrOpt(
        'missing_state_policy',
        default='fail_constrained',
        choices=[
            ('fail_constrained',
             'A host whose GPU state is missing or stale fails only GPU '
             'requests whose flavor sets a gpu: constraint (gpu:model, '
             'gpu:vendor, gpu:mode, gpu:vgpu_type, gpu:memory_min, '
             'gpu:cuda_cc_min, gpu:driver_min, or gpu:health other than '
             'any). Other GPU requests (a plain resources:VGPU=1 flavor) '
             'pass it and the weighers treat it as average: Nova schedules '
             'them as it would without gpu-nova-ext.'),
            ('fail_all',
             'Such a host fails every GPU request, also those without gpu: '
             'constraints (their implicit gpu:health=healthy needs live '
             'state): no GPU server lands where no agent reports health.'),
            ('fail', 'Deprecated name of fail_all.'),
            ('pass', 'Such a host passes every GPU filter; the weighers '
                     'treat it as average.'),
        ],
        help="""
What the GPU filters do with a host whose GPU state (cast by its
gpu-nova-agent) is missing or older than ``state_ttl``: for example while
the agents are being rolled out, or when a host's agent died.  Each such
host is logged once per ``state_ttl``; ``gpu-nova-ext audit --state-wait``
lists them.  Requests without GPUs are never affected.
"""),
    cfg.StrOpt(
        'intra_host_policy',
        default='pack',
        choices=[
            ('pack', 'Prefer the GPU with the least free capacity left.'),
            ('spread', 'Prefer the GPU with the most free capacity left.'),
            ('coolest', 'Prefer the GPU with the most thermal headroom.'),
            ('least_loaded', 'Prefer the GPU with the lowest utilization.'),
        ],
        help="""
Which GPU inside a host GpuCandidateOrderFilter puts first among the
host's allocation candidates (Nova claims the first).  A flavor's
``gpu:intra_host_policy`` overrides it.
"""),
    cfg.StrOpt(
        'state_topic',
        default='gpu_nova_ext_scheduler',
        help="""
oslo.messaging topic on which agents fanout-cast GPU state.  Must match
``[agent] scheduler_topic`` of the agents.
"""),
    cfg.StrOpt(
        'agent_topic',
        default='gpu_nova_ext_agent',
        help="""
oslo.messaging topic on which a starting scheduler asks every agent to
resend its state.  Must match ``[agent] agent_topic`` of the agents.
"""),
    cfg.BoolOpt(
        'state_listener',
        default=True,
        help="""
Whether the GPU filters and weighers start the GPU state listener (an
oslo.messaging RPC server on ``state_topic``, using nova-scheduler's
``transport_url``) in each nova-scheduler process the first time they run.

Possible values:

* True: the state cache receives the agents' casts by itself.
* False: something else feeds the cache (the simulator, tests, tools);
  without it every host counts as having no GPU state and
  ``missing_state_policy`` decides.
"""),
    cfg.FloatOpt(
        'startup_state_wait',
        default=3.0,
        min=0.0,
        help="""
Most seconds the first request a nova-scheduler process filters may wait,
right after the state listener starts, for the agents' answers to its
``resend_gpu_state`` cast.  The wait ends a quarter of a second after the
last answer, or a quarter of a second after the start when no agent
answers (a cloud without agents waits no longer than that); without it the
first GPU request after a start would find no GPU state.  0 does not
wait.

Related options:

* ``state_listener``
* ``missing_state_policy``
"""),
    cfg.IntOpt(
        'max_payload_bytes',
        default=1048576,
        min=1024,
        deprecated_for_removal=True,
        deprecated_since='1.0.0',
        deprecated_reason='The state schema bounds every string, list and '
                          'number of a message, so its size is bounded by '
                          'max_gpus_per_host; this option is not read.',
        help="""
Not read any more (see the deprecation note).
"""),
    cfg.IntOpt(
        'max_gpus_per_host',
        default=64,
        min=1,
        help="""
Most GPUs accepted in one host's state payload; a payload with more is
dropped with a log line.
"""),
]


def register_opts(conf):
    utils.register_group(conf, gpu_scheduler_group)
    conf.register_opts(gpu_scheduler_opts, group=gpu_scheduler_group)


def list_opts():
    return {gpu_scheduler_group: gpu_scheduler_opts}
