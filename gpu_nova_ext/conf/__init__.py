# SPDX-License-Identifier: Apache-2.0

"""Configuration options of gpu_nova_ext, one module per option group.

Two sets exist: the agent's (and the CLI's) own configuration, and the part
that goes into nova.conf for nova-scheduler (``[gpu_scheduler]``,
``[gpu_weights]``).  Nothing registers options on import.
"""
from oslo_config import cfg

from gpu_nova_ext.conf import agent
from gpu_nova_ext.conf import default
from gpu_nova_ext.conf import gpu_scheduler
from gpu_nova_ext.conf import gpu_weights
from gpu_nova_ext.conf import health
from gpu_nova_ext.conf import mig
from gpu_nova_ext.conf import placement
from gpu_nova_ext.conf import power
from gpu_nova_ext.conf import privsep
from gpu_nova_ext.conf import remediation

AGENT_MODULES = (default, agent, placement, health, remediation, mig,
                 power, privsep)
NOVA_MODULES = (gpu_scheduler, gpu_weights)


def register_agent_opts(conf: cfg.ConfigOpts) -> None:
    """Register the agent's and CLI's options on ``conf``."""
    for module in AGENT_MODULES:
        module.register_opts(conf)


def register_nova_opts(conf: cfg.ConfigOpts) -> None:
    """Register the nova.conf part (scheduler side) on ``conf``.

    Idempotent, as Nova-loaded code may call it from several plugins.
    """
    for module in NOVA_MODULES:
        try:
            module.register_opts(conf)
        except cfg.DuplicateOptError:
            pass


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every option group (the simulator needs both sides)."""
    register_agent_opts(conf)
    register_nova_opts(conf)
