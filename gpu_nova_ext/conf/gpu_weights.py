# SPDX-License-Identifier: Apache-2.0

"""[gpu_weights] options: multipliers of the gpu_nova_ext weighers.

Nova normalises each weigher's raw values across the hosts to [0, 1] and
multiplies them by the weigher's multiplier, so each of Nova's built-in
weighers adds at most its multiplier (1.0 by default) to a host's weight.
RAM, CPU, disk and hypervisor-version weighers together spread load by up
to about 4.0.  Defaults here are large enough that, for a GPU request, the
GPU policy (binpack by default) decides, and small enough that Nova's
build-failure and cross-cell weighers (1e6) still win.

Every multiplier can be overridden per host aggregate with aggregate
metadata of the same name.
"""
import math

from oslo_config import cfg
from oslo_config import types

from gpu_nova_ext.conf import utils

gpu_weights_group = cfg.OptGroup(
    'gpu_weights',
    title='GPU weigher multipliers',
    help='Multipliers of the gpu_nova_ext weighers; each can be overridden '
         'per aggregate by aggregate metadata of the same name.')

# Multipliers are finite and bounded: NaN or an infinity would turn every
# host's weight into NaN (and the simulator's JSON into NaN/Infinity).
MULTIPLIER_MAX = 1e6


class FiniteFloat(types.Float):
    """A float option value within [min, max]; NaN is refused too."""

    def __call__(self, value):
        value = super().__call__(value)
        if not math.isfinite(value):
            raise ValueError('Should be a finite number, got %s' % value)
        return value


MULTIPLIER = FiniteFloat(min=-MULTIPLIER_MAX, max=MULTIPLIER_MAX)

gpu_weights_opts = [
    cfg.Opt(
        'packing_weight_multiplier',
        type=MULTIPLIER,
        default=-10.0,
        help="""
Multiplier of GpuPackingWeigher, whose raw value is the host's free GPU
capacity after this request.

Possible values:

* A negative number: binpack, fill hosts whose GPUs are already in use.
* A positive number: spread GPU servers over hosts.
* 0: off.

The default (-10.0) outweighs Nova's RAM/CPU/disk spreading (about 4.0
together) for GPU requests.
"""),
    cfg.Opt(
        'utilization_weight_multiplier',
        type=MULTIPLIER,
        default=2.0,
        help="""
Multiplier of GpuUtilizationWeigher (1 - mean utilization of the host's
candidate GPUs).  Positive prefers idle GPUs.
"""),
    cfg.Opt(
        'thermal_weight_multiplier',
        type=MULTIPLIER,
        default=1.0,
        help="""
Multiplier of GpuThermalWeigher (thermal headroom: slowdown threshold
minus temperature).  Positive prefers cool GPUs.
"""),
    cfg.Opt(
        'power_weight_multiplier',
        type=MULTIPLIER,
        default=0.0,
        help="""
Multiplier of GpuPowerWeigher (power headroom: limit minus draw).
Positive prefers GPUs far from their power cap.  Off by default.
"""),
    cfg.Opt(
        'energy_weight_multiplier',
        type=MULTIPLIER,
        default=0.0,
        help="""
Multiplier of GpuEnergyWeigher (work per watt: the relative capability of
the GPU's model, from ``capability_scores``, over the GPU's power limit,
which a ``[power] profiles`` cap lowers).  Positive prefers the GPUs that
do the request's work for the least energy.  Off by default.
"""),
    cfg.Opt(
        'capability_weight_multiplier',
        type=MULTIPLIER,
        default=0.0,
        help="""
Multiplier of GpuCapabilityWeigher (relative capability of the host's GPU
model, from ``capability_scores``).  Positive prefers the most capable
GPUs; negative keeps them free for requests that need them.  Off by
default.
"""),
    cfg.DictOpt(
        'capability_scores',
        default={},
        help="""
Relative capability per normalized GPU model, overriding or extending the
shipped table, for example ``H100_SXM5_80GB:10,A100_80GB_PCIE:6,L4:2``.
A model matches the longest key it starts with at a ``_`` boundary.
"""),
    cfg.Opt(
        'fragmentation_weight_multiplier',
        type=MULTIPLIER,
        default=0.0,
        help="""
Multiplier of GpuFragmentationWeigher, whose raw value is how much this
request lowers the host's GPU fragmentation (the expected free GPU
capacity that the expected request mix could not use there: GPUs without
enough whole free GPUs, vCPUs or RAM beside them); a request that
strands capacity lowers it least.  Off by default.

Possible values:

* A positive number: put each request where the cloud keeps most of its
  ability to take the requests it is expected to get (after
  Fragmentation Gradient Descent, Weng et al., USENIX ATC'23).  Use 100
  (ten times the packing weigher's default), keep
  ``packing_weight_multiplier`` at -10.0 to break its ties towards
  packing (it outweighs Nova's RAM/CPU/disk spreading), and set
  ``[gpu_scheduler] intra_host_policy = fragmentation``;
  ``gpu-nova-ext simulate --compare frag`` runs that combination.
* 0: off.

Related options:

* ``[gpu_scheduler] fragmentation_request_mix``: the expected request
  mix, learned from the requests served when empty.
* ``[gpu_scheduler] fragmentation_mix_decay``
"""),
    cfg.Opt(
        'avoidance_weight_multiplier',
        type=MULTIPLIER,
        default=4.0,
        help="""
Multiplier of GpuHostAvoidanceWeigher: for a request without GPUs, how
strongly to avoid hosts whose idle GPU capacity it would strand.  0 turns
it off; GPU requests are not affected.
"""),
    cfg.Opt(
        'topology_weight_multiplier',
        type=MULTIPLIER,
        default=10.0,
        help="""
Multiplier of GpuTopologyWeigher: for a GPU request, how strongly to take
GPUs from the NVLink (xGMI) domains with the least free capacity, so that
whole domains stay free for the multi-GPU servers that need them.  Hosts
whose GPUs have no link domain weigh as the mean.

Possible values:

* A positive number: use up half-used domains first.  The default (10.0)
  matches the packing weigher's magnitude.
* 0: off.

Related options:

* ``gpu:topology`` (flavor): requires one domain, switch or NUMA node.
"""),
    cfg.Opt(
        'reservation_weight_multiplier',
        type=MULTIPLIER,
        default=100.0,
        help="""
Multiplier of GpuReservationWeigher: for a GPU request, how strongly to
prefer the GPUs and hosts reserved for the request's project
(``openstack gpu reservation create``: a GPU's reservation trait, or a host
aggregate with ``filter_tenant_id`` metadata naming the project).

Possible values:

* A positive number: the project's requests go to its reserved GPUs and
  hosts first.  The default (100.0) outweighs every other GPU and Nova
  weigher at their defaults, and stays below Nova's build-failure weigher.
* 0: off (reserved GPUs are still kept from other projects by
  GpuReservationFilter).

Related options:

* ``[filter_scheduler] enabled_filters``: GpuReservationFilter (GPUs) and
  AggregateMultiTenancyIsolation (whole hosts) keep other projects off.
"""),
]


def register_opts(conf):
    utils.register_group(conf, gpu_weights_group)
    conf.register_opts(gpu_weights_opts, group=gpu_weights_group)


def list_opts():
    return {gpu_weights_group: gpu_weights_opts}
