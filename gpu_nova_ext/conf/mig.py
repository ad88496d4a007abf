# SPDX-License-Identifier: Apache-2.0

"""[mig] options: the MIG layouts the agent keeps on this host's GPUs."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

mig_group = cfg.OptGroup(
    'mig',
    title='MIG layout options',
    help='NVIDIA Multi-Instance GPU layouts the agent lays out on the '
         'GPUs of this host.')

mig_opts = [
    cfg.MultiStrOpt(
        'layouts',
        default=[],
        help="""
The GPU instances wanted on every GPU of a model, one model per value:
``MODEL:PROFILE=COUNT[,PROFILE=COUNT...]``, for example
``A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2``.

``MODEL`` is the normalized model (``gpu-nova-ext discover`` shows it);
profiles are NVIDIA's MIG profile names (``nvidia-smi mig -lgip``).  The
agent checks each value at start against NVIDIA's documented profiles
(A100 40/80 GB, A30, H100 80 GB, H200, B200) and refuses a model without
MIG, a profile the model lacks, more instances than a profile allows or
than the GPU's slices hold, and a model that nova.conf passes through as
a whole GPU (``[pci] device_spec``).

A GPU of a listed model is laid out only while nothing uses it: no
allocation in Placement on its providers and no server holding it in
libvirt.  A GPU in use is never touched; ``gpu-nova-ext mig plan`` shows
what would change and what cannot.

Related options:

* ``aggregate_layouts``, ``host_layouts``: per aggregate and per host;
  host > aggregate > this option.
* ``apply``: off, the agent only reports what it would do.
"""),
    cfg.MultiStrOpt(
        'aggregate_layouts',
        default=[],
        help="""
Layouts for the hosts of a host aggregate, over ``layouts``:
``AGGREGATE_UUID:MODEL:PROFILE=COUNT[,PROFILE=COUNT...]``, one aggregate
and model per value.  The aggregate is named by its UUID (``openstack
aggregate show NAME -c uuid``): the agent reads the aggregates of its
compute node provider from Placement after each report (Nova mirrors its
host aggregates there).  Until it has read them, or when two of the
host's aggregates give one model different layouts, GPUs of that model
are not laid out and ``gpu-nova-ext mig plan`` says why.  Checked at
start like ``layouts``.
"""),
    cfg.MultiStrOpt(
        'host_layouts',
        default=[],
        help="""
Layouts for one host, over ``aggregate_layouts`` and ``layouts``:
``HOST:MODEL:PROFILE=COUNT[,PROFILE=COUNT...]``, where ``HOST`` is the
agent's ``[DEFAULT] host`` (nova-compute's host name); values of other
hosts are checked and ignored, so one file can serve every host.
"""),
    cfg.BoolOpt(
        'apply',
        default=True,
        help="""
Whether the agent changes MIG mode and GPU instances through NVML to
match ``layouts``.  Off, it logs the plan at each cycle and changes
nothing.
"""),
]


def register_opts(conf):
    utils.register_group(conf, mig_group)
    conf.register_opts(mig_opts, group=mig_group)


def list_opts():
    return {mig_group: mig_opts}
