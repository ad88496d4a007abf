# SPDX-License-Identifier: Apache-2.0

"""Entry points of oslo-config-generator (``oslo.config.opts``)."""
from gpu_nova_ext import conf


def _collect(modules):
    groups = {}
    for module in modules:
        for group, opts in module.list_opts().items():
            groups.setdefault(group, []).extend(opts)
    return list(groups.items())


def list_agent_opts():
    """Options of gpu-nova-agent.conf (also read by gpu-nova-ext)."""
    return _collect(conf.AGENT_MODULES)


def list_nova_opts():
    """Options gpu_nova_ext reads from nova.conf inside nova-scheduler."""
    return _collect(conf.NOVA_MODULES)


def list_opts():
    return list_agent_opts() + list_nova_opts()
