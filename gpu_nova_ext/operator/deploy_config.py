# SPDX-License-Identifier: Apache-2.0

"""The deploy tools' Nova configuration, from the hosts' drop-ins.

Design doc: Packaging, versions and the install matrix.
``gpu-nova-ext nova-conf --no-scheduler`` writes
each GPU compute host's drop-in; :func:`deployment` splits them into what
every Nova service reads (the ``[pci] alias`` entries and ``[filter_scheduler]
pci_in_placement``, without which Nova leaves PCI-in-Placement GPUs out of
quota and ignores an alias's ``resource_class``), what nova-scheduler reads
(:func:`nova_conf.scheduler_section`) and each compute host's own options.
One renderer per tool writes them where that tool reads them, so that a
host's options reach that host's nova-compute and nothing shadows them:

* kolla-ansible merges ``nova.conf``, ``nova/<service>.conf`` and
  ``nova/<host>/nova.conf`` of its custom config directory, in that order;
* openstack-ansible passes ``user_*.yml`` as extra variables, which beat
  group and host variables: ``nova_nova_conf_overrides`` goes whole (Ansible
  replaces a dictionary) into the group variables of the control services
  and the host variables of each compute host, never into ``user_*.yml``;
* OpenStack-Helm's nova chart renders ``conf.nova`` into every pod's
  nova.conf and merges ``conf.overrides.nova_compute.hosts[].conf`` over it
  on the named node (helm-toolkit's daemonset overrides).
"""
import dataclasses
import json
import os

from oslo_config import iniparser
import yaml

from gpu_nova_ext import exception
from gpu_nova_ext.operator import nova_conf

TOOLS = ('kolla-ansible', 'openstack-ansible', 'openstack-helm')
#: the sections nova-conf writes for nova-scheduler (not a compute host's)
SCHEDULER_SECTIONS = frozenset(['filter_scheduler', 'scheduler'])
#: openstack-ansible's inventory groups of the services that read the
#: common and scheduler options (os_nova's env.d)
OSA_CONTROL_GROUPS = ('nova_api_os_compute', 'nova_conductor',
                      'nova_scheduler')

Options = list[tuple[str, str, str]]    # (section, option, value), in order


@dataclasses.dataclass
class Deployment:
    """The Nova options of a GPU cloud, by who reads them."""

    common: Options        # every Nova service
    scheduler: Options     # nova-scheduler
    hosts: dict[str, Options]   # compute host -> its own options
    notes: list[str]       # what an operator must read (from the drop-ins)


class _DropInParser(iniparser.BaseParser):
    """A drop-in's options in order, repeated options kept; its notes."""

    def __init__(self):
        super().__init__()
        self.section = ''
        self.options: Options = []
        self.notes: list[str] = []

    def new_section(self, section):
        self.section = section

    def assignment(self, key, value):
        self.options.append((self.section, key, '\n'.join(value)))

    def comment(self, comment):
        if comment.startswith('NOTE: '):
            self.notes.append(comment[len('NOTE: '):])


def read_drop_in(path: str) -> tuple[Options, list[str]]:
    """(options, notes) of a drop-in file; InvalidArgument when unreadable."""
    parser = _DropInParser()
    try:
        with open(path, encoding='utf-8') as f:
            parser.parse(f)
    except (OSError, UnicodeDecodeError, iniparser.ParseError) as exc:
        raise exception.InvalidArgument(
            argument='drop-in', value=path,
            reason='%s; give the files gpu-nova-ext nova-conf '
                   '--no-scheduler wrote on each GPU host'
                   % (getattr(exc, 'strerror', None) or exc))
    return parser.options, parser.notes


def deployment(drop_ins: dict[str, Options],
               notes: dict[str, list[str]] | None = None) -> Deployment:
    """Split the hosts' drop-ins (host -> options) by who reads what.

    InvalidArgument when two hosts define one alias name differently
    (Nova would take either) or disagree on ``[pci] report_in_placement``.
    """
    aliases: dict[str, tuple[str, str]] = {}   # name -> (value, host)
    in_placement: dict[str, set] = {}          # value -> hosts
    hosts: dict[str, Options] = {}
    out_notes = []
    for host, options in sorted(drop_ins.items()):
        own = []
        for section, option, value in options:
            if section in SCHEDULER_SECTIONS:
                out_notes.append(
                    '%s: [%s] %s left out: the scheduler options are '
                    'written once, for nova-scheduler'
                    % (host, section, option))
                continue
            if (section, option) == ('pci', 'alias'):
                try:
                    name = json.loads(value)['name']
                except (ValueError, TypeError, KeyError):
                    raise exception.InvalidArgument(
                        argument='[pci] alias', value=value,
                        reason='on %s is not a JSON object with a name; '
                               'regenerate that drop-in' % host)
                seen = aliases.setdefault(name, (value, host))
                if seen[0] != value:
                    raise exception.InvalidArgument(
                        argument='[pci] alias', value=name,
                        reason='hosts %s and %s define it differently; '
                               'regenerate both drop-ins with the same '
                               'gpu-nova-ext nova-conf options'
                               % (seen[1], host))
                continue
            if (section, option) == ('pci', 'report_in_placement'):
                in_placement.setdefault(value, set()).add(host)
            own.append((section, option, value))
        hosts[host] = own
        out_notes += ['%s: %s' % (host, n) for n in (notes or {}).get(
            host, ())]
    if len(in_placement) > 1:
        raise exception.InvalidArgument(
            argument='[pci] report_in_placement', value=', '.join(
                '%s on %s' % (v, ','.join(sorted(h)))
                for v, h in sorted(in_placement.items())),
            reason='every host must report PCI devices the same way; '
                   'regenerate the drop-ins with the same '
                   '--no-pci-in-placement choice')
    opts = nova_conf.GeneratorOptions(
        pci_in_placement=in_placement.keys() != {'False'})
    drop = nova_conf.DropIn(host='nova-scheduler')
    nova_conf.scheduler_section(drop, opts, with_pci=bool(aliases))
    common = [('pci', 'alias', value) for value, _ in aliases.values()]
    scheduler = []
    for section, pairs in drop.sections.items():
        for option, value in pairs:
            # nova-api (quota) and nova-conductor read it too
            where = (common if option == 'pci_in_placement'
                     else scheduler)
            where.append((section, option, value))
    return Deployment(common=common, scheduler=scheduler, hosts=hosts,
                      notes=out_notes)


def _ini(options: Options, title: str) -> str:
    lines = ['# %s, written by "gpu-nova-ext deploy-config".' % title]
    section = None
    for sect, option, value in options:
        if sect != section:
            lines += ['', '[%s]' % sect]
            section = sect
        lines.append('%s = %s' % (option, value))
    return '\n'.join(lines) + '\n'


def _nested(options: Options, multi) -> dict:
    """{section: {option: value}}; a repeated option as ``multi(values)``."""
    out: dict[str, dict] = {}
    for section, option, value in options:
        out.setdefault(section, {}).setdefault(option, []).append(value)
    return {s: {o: v[0] if len(v) == 1 else multi(v) for o, v in opts.items()}
            for s, opts in out.items()}


def _yaml(data: dict, title: str) -> str:
    return ('# %s, written by "gpu-nova-ext deploy-config".\n' % title
            + yaml.safe_dump(data, default_flow_style=False,
                             sort_keys=False, width=1000))


def kolla_ansible(dep: Deployment) -> dict[str, str]:
    """Files of kolla-ansible's custom config directory (``config/``)."""
    files = {'nova.conf': _ini(dep.common, 'Every Nova service'),
             os.path.join('nova', 'nova-scheduler.conf'): _ini(
                 dep.scheduler, 'nova-scheduler')}
    for host, options in dep.hosts.items():
        files[os.path.join('nova', host, 'nova.conf')] = _ini(
            options, 'The Nova services of GPU host %s' % host)
    return files


def _osa_overrides(options: Options) -> dict:
    # config_template writes each key of a mapping with null values as a
    # line of its own (a multi-valued option)
    return {'nova_nova_conf_overrides': _nested(
        options, lambda values: dict.fromkeys(values))}


def openstack_ansible(dep: Deployment) -> dict[str, str]:
    """Files of ``/etc/openstack_deploy``: group and host variables."""
    control = _osa_overrides(dep.common + dep.scheduler)
    files = {os.path.join('group_vars', '%s.yml' % group): _yaml(
        control, 'openstack-ansible group %s' % group)
        for group in OSA_CONTROL_GROUPS}
    for host, options in dep.hosts.items():
        files[os.path.join('host_vars', '%s.yml' % host)] = _yaml(
            _osa_overrides(dep.common + options),
            'openstack-ansible GPU compute host %s' % host)
    return files


def openstack_helm(dep: Deployment) -> dict[str, str]:
    """A values file for OpenStack-Helm's nova chart."""
    def multi(values):
        return {'type': 'multistring', 'values': values}

    values = {'conf': {
        'nova': _nested(dep.common + dep.scheduler, multi),
        'overrides': {'nova_compute': {'hosts': [
            {'name': host, 'conf': {'nova': _nested(options, multi)}}
            for host, options in dep.hosts.items()]}}}}
    return {'nova-gpu-values.yaml': _yaml(
        values, 'OpenStack-Helm nova chart values')}


RENDERERS = {'kolla-ansible': kolla_ansible,
             'openstack-ansible': openstack_ansible,
             'openstack-helm': openstack_helm}
