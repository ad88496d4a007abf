# SPDX-License-Identifier: Apache-2.0

"""[health] options: how the agent judges GPU health."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

health_group = cfg.OptGroup(
    'health',
    title='GPU health options',
    help='How gpu-nova-agent judges GPU health from NVML metrics and events.')

health_opts = [
    cfg.FloatOpt(
        'recovery_period',
        default=300.0,
        min=0.0,
        help="""
Seconds a cause of ``degraded`` or ``unhealthy`` must stay gone before the
GPU is ``healthy`` again.  Stops a GPU from flapping in and out of
scheduling under a noisy signal.
"""),
    cfg.FloatOpt(
        'xid_quiet_period',
        default=900.0,
        min=0.0,
        help="""
Seconds without a new critical or degrading XID event before that XID
stops counting as a cause.  ``recovery_period`` then applies as well.
"""),
    cfg.ListOpt(
        'fatal_xids',
        default=['48', '62', '79', '95', '119', '120', '140'],
        help="""
XID codes that make a GPU ``unhealthy`` (NVIDIA's XID catalogue: 48
double-bit ECC, 79 GPU fallen off the bus, 95 uncontained ECC, 119/120 GSP
errors, ...).
"""),
    cfg.ListOpt(
        'degrading_xids',
        default=['63', '64', '74', '92', '94'],
        help="""
XID codes that make a GPU ``degraded`` (63/64 row-remap events, 74 NVLink,
92 high single-bit ECC rate, 94 contained ECC, ...).  XIDs in neither list
are application-caused (13, 31, 43, 45, ...) and ignored for health.
"""),
    cfg.FloatOpt(
        'anomaly_threshold',
        default=0.2,
        min=0.0,
        help="""
Relative deviation of a metric from its learned baseline (EWMA) that counts
as an anomaly: 0.2 is 20%.  A sustained anomaly marks the GPU ``degraded``
with the metric named.
"""),
    cfg.FloatOpt(
        'anomaly_window',
        default=60.0,
        min=0.0,
        help="""
Seconds an anomaly must last before it marks the GPU ``degraded``.
"""),
    cfg.FloatOpt(
        'baseline_alpha',
        default=0.05,
        min=0.001,
        max=1.0,
        help="""
Smoothing factor of the per-metric EWMA baseline (higher follows changes
faster).
"""),
    cfg.ListOpt(
        'pinned_unhealthy',
        default=[],
        help="""
PCI addresses or GPU UUIDs that an operator pins ``unhealthy`` whatever the
metrics say (out of scheduling).
"""),
    cfg.ListOpt(
        'pinned_healthy',
        default=[],
        help="""
PCI addresses or GPU UUIDs that an operator pins ``healthy`` whatever the
metrics say (use with care: a known-noisy sensor).
"""),
]


def register_opts(conf):
    utils.register_group(conf, health_group)
    conf.register_opts(health_opts, group=health_group)


def list_opts():
    return {health_group: health_opts}
