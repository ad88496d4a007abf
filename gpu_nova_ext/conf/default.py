# SPDX-License-Identifier: Apache-2.0

"""[DEFAULT] options of the gpu-nova-agent's own configuration file.

These are registered on the agent's configuration only: nova-scheduler and
nova-api have their own ``[DEFAULT] host``.
"""
import socket

from oslo_config import cfg

default_opts = [
    cfg.StrOpt(
        'host',
        default=socket.gethostname(),
        sample_default='<current_hostname>',
        help="""
Name of this compute host, exactly as nova-compute uses it.

The agent finds the compute node resource provider that nova-compute
created for this host by this name (the hypervisor hostname).  Set it to
the same value as ``[DEFAULT] host`` in this host's nova.conf when that is
set there.
"""),
]


def register_opts(conf):
    conf.register_opts(default_opts)


def list_opts():
    return {'DEFAULT': default_opts}
