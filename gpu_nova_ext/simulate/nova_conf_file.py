# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext simulate --nova-conf FILE``: the schedulers' own options.

nova-scheduler reads the files it is started with (``--config-file``,
later files win); the options that decide where a server lands are taken
from them into the scenario's ``nova_conf:``, over what the scenario sets
(the command line wins over the file, as everywhere), beneath
``--compare``'s overrides.  The files are read with oslo.config on a
private ``ConfigOpts`` holding Nova's and our option definitions, so every
value is converted and checked as nova-scheduler would; only options the
files set are taken (the rest keep the simulator's defaults).

Taken (:data:`GROUPS`): ``[filter_scheduler]``, ``[scheduler]``,
``[metrics]``, ``[gpu_scheduler]``, ``[gpu_weights]``, ``[pci] alias``,
``[DEFAULT] allow_resize_to_same_host`` and ``[quota] driver``; left out
and said (:data:`SERVICE_OPTIONS`): what runs the service rather than
placing servers (workers, the state channel's topics and listener, cell
discovery).  A ``[quota] driver`` that is not Nova's unified-limits driver
does not enforce Keystone limits, so the scenario's ``quotas:`` are not
played, and the progress says so.
"""
import copy
import dataclasses
from typing import Any

from oslo_config import cfg

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception

#: group -> the options taken from it (None: every option of the group)
GROUPS: dict[str, tuple[str, ...] | None] = {
    'filter_scheduler': None,
    'scheduler': None,
    'metrics': None,
    'gpu_scheduler': None,
    'gpu_weights': None,
    'pci': ('alias',),
    'DEFAULT': ('allow_resize_to_same_host',),
    'quota': ('driver',),
}
#: what a simulation without --nova-conf does not account for (said)
NOT_GIVEN = ("the schedulers' own nova.conf (the simulator's filters, "
             'weighers, multipliers and defaults apply; --nova-conf FILE '
             'gives them)')
#: (group, option) of the taken groups that run the service, not placement
SERVICE_OPTIONS = frozenset({
    ('scheduler', 'workers'),
    ('scheduler', 'discover_hosts_in_cells_interval'),
    ('gpu_scheduler', 'state_listener'),
    ('gpu_scheduler', 'state_topic'),
    ('gpu_scheduler', 'agent_topic'),
    ('gpu_scheduler', 'startup_state_wait'),
})


#: --nova-conf's help (simulate's, gpu capacity's and gpu explain's)
HELP = ('A configuration file nova-scheduler is started with (repeat it '
        'in its --config-file order; later files win): the placement '
        'options it sets ([filter_scheduler], [scheduler], [metrics], '
        '[gpu_scheduler], [gpu_weights], [pci] alias, [DEFAULT] '
        'allow_resize_to_same_host, [quota] driver) replace the '
        'simulator\'s; service options (workers, the state channel) are '
        'left out. What was taken is said on stderr.')


@dataclasses.dataclass
class Taken:
    """What the files gave, for the progress lines."""

    #: group -> option -> value (typed, as nova-scheduler reads it)
    options: dict[str, dict[str, Any]]
    #: "[group] option" of the files that the simulator leaves out
    service: list[str]
    #: "[group] option" set in a taken group that no one defines
    unknown: list[str]
    #: "[group] option" of the scenario's nova_conf the files replaced
    replaced: list[str] = dataclasses.field(default_factory=list)
    #: None: quotas are played; else why they are not
    quotas_off: str | None = None


def _nova_opts() -> cfg.ConfigOpts:
    """A ConfigOpts defining every option :data:`GROUPS` names.

    Nova's (from the modules that define them) and ours.
    """
    try:
        from nova.conf import compute
        from nova.conf import pci
        from nova.conf import quota
        from nova.conf import scheduler
    except ImportError:
        raise exception.ConfigError(reason=(
            '--nova-conf reads the files with Nova\'s option definitions, '
            'and Nova is not installed here: pip install '
            '"gpu-nova-ext[simulator]"'))
    conf = cfg.ConfigOpts()
    for module in (scheduler, pci, quota, compute):
        module.register_opts(conf)
    gconf.register_nova_opts(conf)
    return conf


def _label(group: str, name: str) -> str:
    return '[%s] %s' % (group, name)


def read(paths: list[str]) -> Taken:
    """The placement options the files set, later files winning."""
    conf = _nova_opts()
    try:
        conf(args=[], project='nova', default_config_files=list(paths),
             default_config_dirs=[])
    except cfg.ConfigFilesNotFoundError as exc:
        raise exception.ConfigError(reason=(
            '--nova-conf: cannot read %s; give the files nova-scheduler '
            'is started with' % ', '.join(exc.config_files)))
    except cfg.ConfigFileParseError as exc:
        raise exception.ConfigError(reason=(
            '--nova-conf %s: not an INI file: %s' % (exc.config_file,
                                                     exc.msg)))
    out = Taken(options={}, service=[], unknown=[])
    for group, names in GROUPS.items():
        defined = (conf if group == 'DEFAULT' else conf[group]).keys()
        for name in sorted(names or defined):
            if name not in defined:      # not in this Nova release
                continue
            where, value = _get(conf, group, name, paths)
            if where is None or where.location != cfg.Locations.user:
                continue                  # the files do not set it
            if (group, name) in SERVICE_OPTIONS:
                out.service.append(_label(group, name))
                continue
            out.options.setdefault(group, {})[name] = value
    out.unknown = _unknown(paths, conf)
    return out


def _get(conf: cfg.ConfigOpts, group: str, name: str, paths: list[str]):
    """(where the option was set, its value), as nova-scheduler reads it."""
    group_name = None if group == 'DEFAULT' else group
    try:
        value = (conf if group_name is None else conf[group])[name]
        return conf.get_location(name, group_name), value
    except (cfg.ConfigFileValueError, ValueError) as exc:
        # oslo.config raises its own error from the type's ValueError
        why = exc.__context__ or exc
        raise exception.ConfigError(reason=(
            '--nova-conf %s: bad value of %s: %s; nova-scheduler refuses '
            'it too, fix it there' % (', '.join(paths), _label(group, name),
                                      why)))


def _unknown(paths: list[str], conf: cfg.ConfigOpts) -> list[str]:
    """Keys of the whole taken groups that no option defines.

    Typos: nova-scheduler ignores them, so they place nothing.
    """
    unknown: set[str] = set()
    for path in paths:
        sections: dict[str, dict[str, list[str]]] = {}
        cfg.ConfigParser(path, sections).parse()
        for group, names in GROUPS.items():
            if names is not None:
                continue
            defined = set(conf[group].keys())
            unknown |= {_label(group, key) for key in sections.get(group, {})
                        if key not in defined}
    return sorted(unknown)


def apply(scenario, taken: Taken):
    """A copy of ``scenario`` whose ``nova_conf`` holds ``taken``.

    ``taken`` records the options it replaced and whether quotas stay.
    """
    out = copy.copy(scenario)
    conf = copy.deepcopy(scenario.nova_conf)
    taken.replaced, taken.quotas_off = [], None
    for group, options in taken.options.items():
        if group == 'quota':
            continue                      # the simulator's quotas decide
        mine = conf.setdefault(group, {})
        for name, value in options.items():
            if name in mine and mine[name] != value:
                taken.replaced.append(_label(group, name))
            mine[name] = value
    out.nova_conf = conf
    driver = taken.options.get('quota', {}).get('driver')
    if driver is not None and scenario.quotas:
        from nova.limit import utils as limit_utils
        if driver != limit_utils.UNIFIED_LIMITS_DRIVER:
            taken.quotas_off = (
                '[quota] driver %s does not enforce Keystone unified '
                'limits: the scenario\'s %d quotas: entries are not '
                'played' % (driver, len(scenario.quotas)))
            out.quotas = []
    return out


def notes(taken: Taken, paths: list[str]) -> list[str]:
    """What :func:`read` and :func:`apply` did, one line each."""
    names = sorted(_label(group, name)
                   for group, options in taken.options.items()
                   for name in options)
    out = ['--nova-conf %s: took %s' % (
        ', '.join(paths), ', '.join(names) if names else
        'no placement option (the simulator\'s defaults apply)')]
    if taken.replaced:
        out.append('--nova-conf replaced the scenario\'s nova_conf: %s'
                   % ', '.join(taken.replaced))
    if taken.service:
        out.append('--nova-conf: left out (they run the service, not '
                   'placement): %s' % ', '.join(taken.service))
    if taken.unknown:
        out.append('--nova-conf: not options of Nova or gpu-nova-ext, '
                   'ignored as nova-scheduler ignores them: %s'
                   % ', '.join(taken.unknown))
    if taken.quotas_off:
        out.append('--nova-conf: ' + taken.quotas_off)
    return out


def given(paths: list[str]) -> tuple[Taken, list[str]] | None:
    """``(read(paths), paths)``; None without files."""
    return (read(paths), list(paths)) if paths else None
