# SPDX-License-Identifier: Apache-2.0

"""[gpu_nova_ext_privileged]: the agent's privsep daemon (oslo.privsep).

The options are oslo.privsep's own (``priv_context.OPTS``), in the group
of the context :mod:`gpu_nova_ext.privsep` (loaded lazily: Nova-loaded
code imports this package and must not start a privsep context).
"""
import copy

from oslo_config import cfg

from gpu_nova_ext.conf import utils

GROUP = 'gpu_nova_ext_privileged'

privileged_group = cfg.OptGroup(
    GROUP,
    title='Privileged daemon of the GPU agent (oslo.privsep)',
    help="""
The agent runs unprivileged.  Setting MIG mode, creating and destroying
GPU instances and setting power limits run in an oslo.privsep daemon that
the agent starts, through ``helper_command``, at the first such call.
By default that command is ``sudo <venv>/bin/privsep-helper
--config-file <the agent's files>``: the sudoers drop-in
contrib/sudoers.d/gpu-nova-agent allows exactly it.
""")


def _opts() -> list[cfg.Opt]:
    # first: it imports oslo.privsep without eventlet's deprecation warning
    from gpu_nova_ext import privsep
    from oslo_privsep import capabilities
    from oslo_privsep import priv_context
    opts = copy.deepcopy(priv_context.OPTS)
    for opt in opts:
        if opt.name == 'capabilities':
            opt.default = list(privsep.CAPABILITIES)
            opt.sample_default = ','.join(
                capabilities.CAPS_BYVALUE[c] for c in privsep.CAPABILITIES)
        elif opt.name == 'helper_command':
            opt.sample_default = ('sudo <venv>/bin/privsep-helper '
                                  '--config-file <the agent\'s files>')
    return opts


def register_opts(conf: cfg.ConfigOpts) -> None:
    utils.register_group(conf, privileged_group)
    conf.register_opts(_opts(), group=GROUP)


def list_opts():
    return {privileged_group: _opts()}
