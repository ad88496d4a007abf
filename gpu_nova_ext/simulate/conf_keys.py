# SPDX-License-Identifier: Apache-2.0

"""A scenario's option keys: nova_conf:, agent_conf:, placement_conf:.

``nova_conf:`` is checked for shape by the scenario schema and against
Nova's options by
:mod:`gpu_nova_ext.simulate.nova_config` (that needs Nova).  ``agent_conf:``
sets options of every host's gpu-nova-agent: the ``[health]`` group (the
health judge's hysteresis, XID lists, pins) and ``[agent]
report_interval`` / ``metrics_interval`` (both run on the simulated
clock); each value is checked against the option's type, choices and
bounds here, before any service starts.  The agent's other options
(where it finds libvirt, NVML and Placement) are the simulator's.

``placement_conf:`` sets options of the embedded Placement's
``[placement]`` and ``[workarounds]`` groups, checked against Placement's
own option definitions (``placement.conf.register_opts`` on a private
ConfigOpts).  Without it the simulator runs with the settings we
recommend (:mod:`gpu_nova_ext.operator.scale_settings`, Nova's
``[scheduler] max_placement_results`` included); a mapping changes
options on top of them; ``placement_conf: stock`` runs Placement's and
Nova's stock defaults.
"""
from typing import Any

from oslo_config import cfg

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import scale_settings
from gpu_nova_ext.simulate import schema

#: group -> options a scenario may set (None: every option of the group);
#: the scenario schema reads the groups
AGENT_OPTIONS: dict[str, tuple[str, ...] | None] = {
    'health': None,
    'agent': ('report_interval', 'metrics_interval'),
}


def nova_conf(value: dict) -> dict[str, dict[str, Any]]:
    """``nova_conf:`` (its shape checked by the scenario schema)."""
    return {str(group): {str(k): v for k, v in (opts or {}).items()}
            for group, opts in value.items()}


#: Placement option groups a scenario may set (database, auth and the API
#: are the simulator's; the scenario schema reads them)
PLACEMENT_GROUPS = ('placement', 'workarounds')
#: ``placement_conf: stock``: Placement's and Nova's stock defaults
STOCK = 'stock'


def placement_opts() -> cfg.ConfigOpts:
    """A ConfigOpts with Placement's own options registered."""
    from placement import conf as placement_conf_module
    conf = cfg.ConfigOpts()
    placement_conf_module.register_opts(conf)
    return conf


def recommended(hosts: int) -> dict[tuple[str, str], Any]:
    """The recommended Placement options for a cloud of ``hosts``."""
    out = dict(scale_settings.PLACEMENT)
    out[('placement', 'max_allocation_candidates')] = (
        scale_settings.candidates(hosts))
    return out


def placement_conf(src: schema.Source, value: Any, hosts: int = 0
                   ) -> tuple[dict[tuple[str, str], Any], bool]:
    """``(options, recommended)`` of ``placement_conf:``.

    ``options`` is ``{(group, option): value}`` for the embedded
    Placement; ``recommended`` says whether the simulator's defaults are
    the recommended settings for a cloud of ``hosts`` (False for
    ``stock``).  The scenario schema has checked the shape and the
    groups; option names and values are checked here against
    Placement's own option definitions, which a schema cannot read.
    """
    if value == STOCK:
        return {}, False
    if value is None:
        return recommended(hosts), True
    conf = placement_opts()
    # the simulator's own database (not checked: set by the embedded app)
    conf.set_override('connection', 'sqlite://', group='placement_database')
    conf([], project='placement', default_config_files=[],
         default_config_dirs=[])
    out = recommended(hosts)
    for group, opts in value.items():
        entry = 'placement_conf.%s' % group
        for name, val in (opts or {}).items():
            _set_checked(src, conf, group, name, val, entry,
                         tuple(getattr(conf, group)),
                         "Placement's configuration reference")
            out[(group, name)] = val
    return out, True


def _set_checked(src: schema.Source, conf: cfg.ConfigOpts, group: str,
                 name: str, val: Any, entry: str, allowed: tuple,
                 reference: str) -> None:
    """Set one option of a scenario's conf key, checked as oslo does."""
    if name not in allowed:
        raise src.fail(entry, 'unknown key %r. Allowed keys: %s. Fix the '
                       'spelling or remove it.' % (name, ', '.join(allowed)))
    try:
        conf.set_override(name, val, group)
        # set_override converts; reading it back checks choices and bounds
        getattr(getattr(conf, group), name)
    except (ValueError, TypeError, cfg.Error) as exc:
        raise src.fail('%s.%s' % (entry, name), 'bad value %r: %s. See '
                       'the option in %s.' % (val, exc, reference))


def _agent_opts() -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    gconf.register_agent_opts(conf)
    conf([], project='gpu-nova-ext', default_config_files=[],
         default_config_dirs=[])
    return conf


def agent_conf(src: schema.Source,
               value: dict) -> dict[tuple[str, str], Any]:
    """``agent_conf:`` as ``{(group, option): value}``.

    The scenario schema has checked the shape and the groups; option
    names and values are checked here against the agent's own option
    definitions.
    """
    conf = _agent_opts()
    out = {}
    for group, opts in value.items():
        entry = 'agent_conf.%s' % group
        allowed = AGENT_OPTIONS[group] or tuple(getattr(conf, group))
        for name, val in (opts or {}).items():
            _set_checked(src, conf, group, name, val, entry, allowed,
                         'etc/gpu-nova-ext/gpu-nova-agent.conf.sample')
            out[(group, name)] = val
    return out


def apply_agent_conf(conf: cfg.ConfigOpts,
                     values: dict[tuple[str, str], Any]) -> None:
    """Set a scenario's ``agent_conf:`` on one host's agent options."""
    for (group, name), value in values.items():
        conf.set_override(name, value, group)
