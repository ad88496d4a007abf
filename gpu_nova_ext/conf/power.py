# SPDX-License-Identifier: Apache-2.0

"""[power] options: the power policy the agent keeps on this host's GPUs."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

power_group = cfg.OptGroup(
    'power',
    title='GPU power policy options',
    help='Power limits the agent sets on the GPUs of this host.')

power_opts = [
    cfg.MultiStrOpt(
        'profiles',
        default=[],
        help="""
The power profile of every GPU of a model, one model per value:
``MODEL:PROFILE``; ``*:PROFILE`` is the profile of the models not named.

Possible values of ``PROFILE``:

* ``max-performance``: the highest limit the board allows
* ``balanced``: 85 % of the board's default limit
* ``efficiency``: 70 % of the board's default limit
* ``<N>W``: a limit of N watts, for example ``250W``
* ``<N>%``: N percent (10 to 100) of the board's default limit

The agent sets the limit at each cycle where it differs (a driver reload
resets limits to their defaults, so they are set again), through NVML's
power-management limit on NVIDIA GPUs and the kernel's hwmon
``power1_cap`` on AMD GPUs, and reports the profile in the GPU state
(flavors ask one with ``gpu:power_profile``) and the exporter.  A named
profile is kept within the board's limits; a value in watts outside them
is refused at start.  ``aggregate_profiles`` and ``host_profiles`` set
profiles per aggregate and per host: host > aggregate > this option (in
each, a model's own value before its ``*``).
"""),
    cfg.MultiStrOpt(
        'aggregate_profiles',
        default=[],
        help="""
Power profiles for the hosts of a host aggregate, over ``profiles``:
``AGGREGATE_UUID:MODEL:PROFILE`` (``MODEL`` may be ``*``).  The agent reads
its compute node provider's aggregates from Placement after each report;
until it has, a GPU whose model has an aggregate profile gets none, and
the exporter's ``gpu_nova_ext_power_profile`` carries the reason.
"""),
    cfg.MultiStrOpt(
        'host_profiles',
        default=[],
        help="""
Power profiles for one host, over ``aggregate_profiles`` and
``profiles``: ``HOST:MODEL:PROFILE`` (``MODEL`` may be ``*``), where
``HOST`` is the agent's ``[DEFAULT] host``; values of other hosts are
checked and ignored.
"""),
]


def register_opts(conf):
    utils.register_group(conf, power_group)
    conf.register_opts(power_opts, group=power_group)


def list_opts():
    return {power_group: power_opts}
