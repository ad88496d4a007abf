# SPDX-License-Identifier: Apache-2.0

"""The agent's root work: one oslo.privsep context (as Nova and os-brick).

The agent runs unprivileged; what NVML and the kernel refuse to a plain
user (MIG mode, GPU instances, power limits) runs in a privsep daemon
that ``sudo privsep-helper`` starts at the first privileged call.  Only
the entry points of :mod:`gpu_nova_ext.privsep.gpu` run there: the
context's prefix is this package, so an ``entrypoint`` declared anywhere
else fails at import.  design doc: Privileged work.

Like every privsep context, constructing it registers the
``[gpu_nova_ext_privileged]`` options on oslo.config's global ``CONF``:
that is where ``privsep-helper`` (which parses the agent's configuration
files into the global ``CONF``) reads them.  The agent itself keeps its
own ``ConfigOpts``; :func:`init` hands the client's part to the context.
"""
import shlex
import sys
import warnings

from oslo_config import cfg

with warnings.catch_warnings():
    # oslo.privsep imports eventlet where it is installed (Nova's venvs),
    # and eventlet warns that it is deprecated: not news to an operator
    # running gpu-nova-ext discover
    warnings.filterwarnings('ignore', message='(?s).*Eventlet is deprecated')
    from oslo_privsep import capabilities as caps
    from oslo_privsep import priv_context

from gpu_nova_ext.conf import privsep as privsep_conf

GROUP = privsep_conf.GROUP

CAPABILITIES = (
    # The NVIDIA kernel driver lets only capable(CAP_SYS_ADMIN) change a
    # GPU (its os_is_administrator()): nvmlDeviceSetMigMode,
    # nvmlDeviceCreateGpuInstanceWithPlacement, nvmlGpuInstanceDestroy and
    # nvmlDeviceSetPowerManagementLimit answer NVML_ERROR_NO_PERMISSION
    # without it.
    caps.CAP_SYS_ADMIN,
    # Writing the amdgpu hwmon power1_cap (root, 0644) and opening the MIG
    # configuration capability /dev/nvidia-caps/nvidia-cap1 (root, 0400)
    # whatever user the daemon runs as ([gpu_nova_ext_privileged] user may
    # name an unprivileged one).
    caps.CAP_DAC_OVERRIDE,
)

sys_admin_pctxt = priv_context.PrivContext(
    __name__,
    cfg_section=GROUP,
    pypath=__name__ + '.sys_admin_pctxt',
    capabilities=CAPABILITIES)

#: the options the agent's side of privsep reads (the daemon reads the
#: others, capabilities, user, group and thread_pool_size, from the
#: configuration files privsep-helper is given)
CLIENT_OPTIONS = ('helper_command', 'logger_name', 'log_daemon_traceback')


def helper_command(conf: cfg.ConfigOpts) -> str:
    """The command that starts the daemon, unless the option names one.

    ``sudo`` with the ``privsep-helper`` of this Python's environment (the
    agent's virtual environment, off sudo's ``secure_path``) and the
    agent's own ``--config-file`` / ``--config-dir`` arguments, so that the
    sudoers drop-in (contrib/sudoers.d/gpu-nova-agent) names the exact
    command.
    """
    if conf[GROUP].helper_command:
        return conf[GROUP].helper_command
    cmd = ['sudo', sys.exec_prefix + '/bin/privsep-helper']
    for option, flag in (('config_file', '--config-file'),
                         ('config_dir', '--config-dir')):
        try:
            paths = conf[option] or ()
        except cfg.NoSuchOptError:      # a ConfigOpts never parsed
            paths = ()
        for path in paths:
            cmd += [flag, path]
    return shlex.join(cmd)


def init(conf: cfg.ConfigOpts) -> None:
    """Hand the agent's ``[gpu_nova_ext_privileged]`` to the context.

    Called once at the agent's start, after its configuration is loaded
    and before any privileged call (as cyborg's agent calls
    ``priv_context.init``).  The daemon itself starts at the first call.
    """
    for name in CLIENT_OPTIONS:
        value = (helper_command(conf) if name == 'helper_command'
                 else conf[GROUP][name])
        cfg.CONF.set_override(name, value, group=GROUP)
