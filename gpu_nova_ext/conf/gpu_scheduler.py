# SPDX-License-Identifier: Apache-2.0

"""[gpu_scheduler] options, read by our filters inside nova-scheduler."""
import math

from oslo_config import cfg
from oslo_config import types

from gpu_nova_ext.conf import utils

gpu_scheduler_group = cfg.OptGroup(
    'gpu_scheduler',
    title='GPU scheduler plugin options',
    help='Options of the gpu_nova_ext filters and of the GPU state cache '
         'that runs inside each nova-scheduler process.')

#: The intra-host policies and what each does: the one list for
#: ``intra_host_policy`` below and the flavor key ``gpu:intra_host_policy``
#: (``scheduler.request.KEYS`` reads it from here, as state and conf, which
#: Nova's processes and the agent load, may not import the scheduler).
INTRA_HOST_POLICIES = (
    ('pack', 'Prefer the GPU with the least free capacity left.'),
    ('spread', 'Prefer the GPU with the most free capacity left.'),
    ('coolest', 'Prefer the GPU with the most thermal headroom.'),
    ('least_loaded', 'Prefer the GPU with the lowest utilization.'),
    ('fragmentation',
     'Prefer the GPU whose use leaves the host least fragmented for the '
     'expected request mix (fragmentation_request_mix); among equals, as '
     'pack.'),
)
POLICIES = tuple(dict(INTRA_HOST_POLICIES))


def parse_entry(value: str) -> tuple[float, int, int, float]:
    """``GPUS:VCPUS:RAM_MB:WEIGHT`` -> a tuple; ValueError when bad."""
    parts = value.strip().split(':')
    if len(parts) != 4:
        raise ValueError('%r is not GPUS:VCPUS:RAM_MB:WEIGHT (e.g. '
                         '1:8:32768:60)' % value)
    gpus = float(parts[0])
    vcpus, ram = int(parts[1]), int(parts[2])
    weight = float(parts[3])
    if not (math.isfinite(gpus) and math.isfinite(weight)):
        raise ValueError('%r: GPUs and weight must be finite' % value)
    if not 0 < gpus <= 64 or vcpus < 0 or ram < 0 or weight <= 0:
        raise ValueError('%r: GPUs in (0, 64], vCPUs and RAM at least 0, '
                         'weight above 0' % value)
    if gpus > 1 and gpus != int(gpus):
        raise ValueError('%r: more than one GPU must be a whole number'
                         % value)
    return gpus, vcpus, ram, weight


class MixEntry(types.String):
    """One ``GPUS:VCPUS:RAM_MB:WEIGHT`` entry of the request mix."""

    def __init__(self):
        super().__init__(type_name='GPUS:VCPUS:RAM_MB:WEIGHT')

    def __call__(self, value):
        if isinstance(value, tuple):
            return value
        return parse_entry(super().__call__(value))

    def _formatter(self, value):
        if isinstance(value, tuple):
            return '%g:%d:%d:%g' % value
        return super()._formatter(value)


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
host is logged once per ``state_ttl``; ``openstack gpu audit --state-wait``
lists them.  Requests without GPUs are never affected.
"""),
    cfg.StrOpt(
        'intra_host_policy',
        default='pack',
        choices=INTRA_HOST_POLICIES,
        help="""
Which GPU inside a host GpuCandidateOrderFilter puts first among the
host's allocation candidates (Nova claims the first).  A flavor's
``gpu:intra_host_policy`` overrides it.
"""),
    cfg.ListOpt(
        'fragmentation_request_mix',
        item_type=MixEntry(),
        default=[],
        help="""
The request mix GpuFragmentationWeigher and the ``fragmentation``
intra-host policy expect, as ``GPUS:VCPUS:RAM_MB:WEIGHT`` entries: GPUs
per server (a fraction below 1 for a vGPU that takes that share of its
GPU), the flavor's vCPUs and RAM, and the shape's relative frequency, for
example ``1:8:32768:60,2:16:65536:10,8:64:262144:5``.

Possible values:

* Empty (the default): each nova-scheduler process learns the mix from
  the GPU requests it weighs (see ``fragmentation_mix_decay``); a process
  starts knowing nothing, and the weigher is neutral until its first
  request.
* Entries: that mix, fixed; nothing is learned.
"""),
    cfg.FloatOpt(
        'fragmentation_mix_decay',
        default=0.999,
        min=0.0,
        max=1.0,
        help="""
How much a learned request counts less with each newer request, when
``fragmentation_request_mix`` is empty: the mix follows the last
``1 / (1 - decay)`` requests or so (0.999: about the last 1,000; half of
the weight on the last 693).  1.0 never forgets; 0 only knows the current
request.
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
