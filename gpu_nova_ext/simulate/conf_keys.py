# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A scenario's option keys: ``nova_conf:`` and ``agent_conf:``.

``nova_conf:`` is checked for shape here and against Nova's options by
:mod:`gpu_nova_ext.simulate.nova_env` (that needs Nova).  ``agent_conf:``
sets options of every host's gpu-nova-agent: the ``[health]`` group (the
health judge's hysteresis, XID lists, pins) and ``[agent]
report_interval`` / ``metrics_interval`` (both run on the simulated
clock); each value is checked against the option's type, choices and
bounds here, before any service starts.  The agent's other options
(where it finds libvirt, NVML and Placement) are the simulator's.
"""
from typing import Any

from oslo_config import cfg

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.simulate import checks

#: group -> options a scenario may set (None: every option of the group)
AGENT_OPTIONS: dict[str, tuple[str, ...] | None] = {
    'health': None,
    'agent': ('report_interval', 'metrics_interval'),
}


def nova_conf(check: checks.Checker, value: Any) -> dict[str, dict[str, Any]]:
    value = check.mapping(value, 'nova_conf')
    out = {}
    for group, opts in value.items():
        entry = 'nova_conf.%s' % group
        opts = check.mapping(opts, entry)
        check.finite_values(opts, entry)
        out[str(group)] = {str(k): v for k, v in opts.items()}
    return out


def _agent_opts() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    gconf.register_agent_opts(conf)
    conf([], project='gpu-nova-ext', default_config_files=[],
         default_config_dirs=[])
    return conf


def agent_conf(check: checks.Checker,
               value: Any) -> dict[tuple[str, str], Any]:
    """``agent_conf:`` as ``{(group, option): value}``, values checked."""
    value = check.mapping(value, 'agent_conf')
    check.keys(value, tuple(AGENT_OPTIONS), 'agent_conf')
    conf = _agent_opts()
    out = {}
    for group, opts in value.items():
        entry = 'agent_conf.%s' % group
        opts = check.mapping(opts, entry)
        allowed = AGENT_OPTIONS[group] or tuple(getattr(conf, group))
        check.keys(opts, allowed, entry)
        for name, val in opts.items():
            check.finite_values(val, '%s.%s' % (entry, name))
            try:
                conf.set_override(name, val, group)
                # set_override converts; reading it back checks bounds
                getattr(getattr(conf, group), name)
            except (ValueError, TypeError, cfg.Error) as exc:
                raise check.fail('%s.%s' % (entry, name), 'bad value %r: '
                                 '%s. See the option in etc/gpu-nova-ext/'
                                 'gpu-nova-agent.conf.sample.' % (val, exc))
            out[(group, name)] = val
    return out


def apply_agent_conf(conf: cfg.ConfigOpts,
                     values: dict[tuple[str, str], Any]) -> None:
    """Set a scenario's ``agent_conf:`` on one host's agent options."""
    for (group, name), value in values.items():
        conf.set_override(name, value, group)
