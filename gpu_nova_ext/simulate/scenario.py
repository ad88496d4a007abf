# SPDX-License-Identifier: Apache-2.0

"""Simulator scenarios: load a YAML file, check it, return plain records.

Everything that can be checked without Nova is checked here, before any
service starts: the scenario schema (:mod:`gpu_nova_ext.simulate.schema`:
unknown keys, types, values, ranges), then what a schema cannot say: host
XML that does not parse, GPUs that the host XML does not have, boots of
unknown flavors, events on unknown hosts or GPUs.  What needs Nova
(extra spec values, nova.conf options, PCI aliases) is checked by
:mod:`gpu_nova_ext.simulate.nova_config` and
:mod:`gpu_nova_ext.simulate.nova_flavors`, also before the first boot.
Every problem is a :class:`gpu_nova_ext.exception.ScenarioError` naming
the file, the entry (as a path: ``hosts[2].gpus[0].model``) and the fix.

The format is the published schema
(``gpu_nova_ext/simulate/scenario_schema.yaml``, shown in the docs:
doc/source/tuning.rst, "Scenario files")
and the shipped, commented ``gpu_nova_ext/simulate/scenarios/example.yaml``.
"""
import dataclasses
import os
from typing import Any

import yaml

from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import simulated
from gpu_nova_ext import naming
from gpu_nova_ext import safe_yaml
from gpu_nova_ext.simulate import conf_keys
from gpu_nova_ext.simulate import host_xml
from gpu_nova_ext.simulate import hostgen
from gpu_nova_ext.simulate import quotas as sim_quotas
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import reservations as sim_reservations
from gpu_nova_ext.simulate import schema
from gpu_nova_ext.simulate import steps

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            'scenarios')
DEFAULT_SCENARIO = os.path.join(SCENARIO_DIR, 'default.yaml')

#: Most hosts of one kind (``count:``) and in a scenario.
MAX_HOSTS = 20000
#: Simulated seconds one step (a boot, an event, a delete) takes.
DEFAULT_STEP_SECONDS = 10.0
#: How nova-compute offers a host's GPUs (the scenario schema reads it).
NOVA_GPU_MODES = ('vgpu', 'pci', 'none')


@dataclasses.dataclass
class Host:
    name: str
    xml_text: str                 # the libvirt test driver XML
    xml_source: str               # file it came from, or "<inline>"
    pci_functions: list[host_xml.PciFunction]
    vcpus: int = 64
    memory_mb: int = 262144
    disk_gb: int = 2000
    cpu_allocation_ratio: float = 4.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0
    nova_gpu_mode: str = 'vgpu'
    enabled_mdev_types: list[str] = dataclasses.field(default_factory=list)
    pci_resource_class: str | None = None
    #: ``[mdev_<type>] mdev_class`` (None: Nova's VGPU)
    vgpu_resource_class: str | None = None
    pci_traits: list[str] = dataclasses.field(default_factory=list)
    agent_mode: str = 'annotate'
    #: host aggregate name -> metadata (e.g. weigher multipliers)
    aggregates: dict[str, dict[str, str]] = dataclasses.field(
        default_factory=dict)
    gpus: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    #: ``mig:``: model -> the layout's ``describe()`` (what the agent's
    #: ``[mig] layouts`` would keep on this kind's GPUs)
    mig_layouts: dict[str, str] = dataclasses.field(default_factory=dict)
    #: mdev type id -> ``hostgen.MigType`` of the layouts' vGPU types
    mig_types: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: ``power:``: model (or ``*``) -> ``power_policy.Profile``
    power_profiles: dict[str, Any] = dataclasses.field(default_factory=dict)

    def function(self, address: str) -> host_xml.PciFunction | None:
        for func in self.pci_functions:
            if func.address == address:
                return func
        return None


@dataclasses.dataclass
class Flavor:
    name: str
    vcpus: int
    ram_mb: int
    disk_gb: int
    extra_specs: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Scenario:
    path: str
    description: str
    nova_conf: dict[str, dict[str, Any]]
    hosts: list[Host]
    flavors: dict[str, Flavor]
    steps: list['steps.Step']
    workload: 'steps.Workload | None' = None
    step_seconds: float = DEFAULT_STEP_SECONDS
    remediation: 'remediation_spec.Spec | None' = None   # None: no remediation
    #: (group, option) -> value for every host's agent
    agent_conf: dict[tuple[str, str], Any] = dataclasses.field(
        default_factory=dict)
    #: (group, option) -> value for the embedded Placement
    placement_conf: dict[tuple[str, str], Any] = dataclasses.field(
        default_factory=dict)
    #: runs with the recommended Placement and Nova settings
    #: (operator/scale_settings.py); False: ``placement_conf: stock``
    recommended: bool = True
    #: our filters and weighers on (``--compare``'s "nova" turns them off)
    gpu_plugins: bool = True
    #: ``reservations:`` (simulate/reservations.py)
    reservations: list = dataclasses.field(default_factory=list)
    #: ``quotas:`` (simulate/quotas.py)
    quotas: list = dataclasses.field(default_factory=list)
    #: ``mig_variants:``: variant -> host kind -> its ``mig:`` value
    mig_variants: dict[str, dict[str, Any]] = dataclasses.field(
        default_factory=dict)
    #: the variant this scenario was loaded with (None: the hosts' own)
    mig_variant: str | None = None
    #: name -> host, built on first use
    _by_name: dict[str, Host] | None = None

    def host(self, name: str) -> Host | None:
        if self._by_name is None or len(self._by_name) != len(self.hosts):
            self._by_name = {h.name: h for h in self.hosts}
        return self._by_name.get(name)

    def error(self, entry: str, reason: str) -> exception.ScenarioError:
        return exception.ScenarioError(file=self.path, entry=entry,
                                       reason=reason)


def load(path: str | None = None, mig_variant: str | None = None
         ) -> Scenario:
    """Read and check a scenario file (the shipped default when None).

    ``mig_variant``: a key of its ``mig_variants:``, whose ``mig:`` values
    replace those of the host kinds it names.
    """
    path = os.path.abspath(path or DEFAULT_SCENARIO)
    src = schema.Source(path)
    try:
        with open(path, encoding='utf-8') as f:
            data = safe_yaml.load(f)
    except FileNotFoundError:
        raise src.fail('file', 'no such file. Pass an existing scenario '
                       'file, or no argument for the shipped one.')
    except OSError as exc:
        raise src.fail('file', 'cannot read it: %s' % exc)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = (' at line %d, column %d' % (mark.line + 1, mark.column + 1)
                 if mark else '')
        raise src.fail('file', 'not valid YAML%s: %s'
                       % (where, getattr(exc, 'problem', None) or exc))
    return from_dict(data, path, mig_variant)


def with_seed(scenario: Scenario, seed: int) -> Scenario:
    """The scenario with its ``workload:`` drawn from another seed.

    A ConfigError naming the fix when it has no workload to draw.
    """
    if scenario.workload is None:
        raise exception.ConfigError(reason=(
            '%s: seeds apply to a workload: and it has none; add one or '
            'run it without seeds' % scenario.path))
    return dataclasses.replace(
        scenario, workload=dataclasses.replace(scenario.workload, seed=seed))


def from_dict(data: Any, path: str,
              mig_variant: str | None = None) -> Scenario:
    """Check parsed scenario data: the schema, then what it cannot say.

    ``path`` names the file in errors and anchors relative ``libvirt_xml``
    paths.
    """
    src = schema.validate(data, path)
    variants = _mig_variants(src, data)
    if mig_variant is not None:
        data = _with_variant(src, data, variants, mig_variant)
    base = os.path.dirname(path)
    hosts: list[Host] = []
    names: set[str] = set()
    for i, item in enumerate(data['hosts']):
        for host in _hosts(src, item, 'hosts[%d]' % i, base):
            if host.name in names:
                raise src.fail('hosts[%d]' % i, 'host name %r is used '
                               'twice; host names must be unique'
                               % host.name)
            names.add(host.name)
            hosts.append(host)
        if len(hosts) > MAX_HOSTS:
            raise src.fail('hosts[%d]' % i, 'more than %d hosts; '
                           'simulate a part of the cloud' % MAX_HOSTS)
    flavors = {}
    for i, item in enumerate(data['flavors']):
        if item['name'] in flavors:
            raise src.fail('flavors[%d].name' % i, 'flavor name %r is '
                           'used twice' % item['name'])
        flavors[item['name']] = _flavor(item)
    scenario = Scenario(
        path=path, description=str(data.get('description') or '').strip(),
        nova_conf=conf_keys.nova_conf(data.get('nova_conf') or {}),
        hosts=hosts, flavors=flavors, steps=[],
        step_seconds=float(data.get('step_seconds', DEFAULT_STEP_SECONDS)),
        mig_variants=variants, mig_variant=mig_variant)
    scenario.agent_conf = conf_keys.agent_conf(
        src, data.get('agent_conf') or {})
    scenario.placement_conf, scenario.recommended = (
        conf_keys.placement_conf(src, data.get('placement_conf'),
                                 len(hosts)))
    if data.get('remediation') is not None:
        scenario.remediation = remediation_spec.parse(data['remediation'])
    scenario.reservations = sim_reservations.parse(
        src, data.get('reservations'), scenario)
    scenario.quotas = sim_quotas.parse(src, data.get('quotas'))
    scenario.steps = [steps.parse_step(src, item, i, scenario)
                      for i, item in enumerate(data.get('boots') or [])]
    rollouts = [s for s in scenario.steps if isinstance(s, steps.Rollout)]
    if len(rollouts) > 1:
        # one roll-out at a time, as openstack gpu rollout run
        raise src.fail('boots[%d].rollout' % rollouts[1].index,
                       'a second roll-out; a scenario has at most one '
                       '(give it the hosts of both: hosts: [...])')
    if data.get('workload'):
        scenario.workload = steps.parse_workload(src, data['workload'],
                                                 scenario)
    return scenario


# The checks below are not in the schema: they compare entries with
# other entries (host kinds, models, the host XML's devices) or run the
# agent's and libvirt's own parsers on a value.

def _mig_variants(src: schema.Source, data: dict) -> dict:
    """``mig_variants:``: its host kinds exist, its layouts parse."""
    kinds = {item['name'] for item in data['hosts']}
    out = {}
    for name, kinds_map in (data.get('mig_variants') or {}).items():
        for kind, value in kinds_map.items():
            entry = schema.entry_path(['mig_variants', name, kind])
            if kind not in kinds:
                raise src.fail(entry, 'no host kind %r in hosts: (host '
                               'kinds: %s)' % (kind, ', '.join(sorted(
                                   str(k) for k in kinds))))
            _mig(src, value, entry)
        out[str(name)] = dict(kinds_map)
    return out


def _with_variant(src: schema.Source, data: dict, variants: dict,
                  name: str) -> dict:
    """``data`` with the ``mig:`` of variant ``name`` on its host kinds."""
    if name not in variants:
        raise src.fail('mig_variants', 'no MIG variant %r (variants: %s)'
                       % (name, ', '.join(sorted(variants)) or 'none'))
    hosts = []
    for item in data['hosts']:
        if item['name'] in variants[name]:
            item = dict(item, mig=variants[name][item['name']])
        hosts.append(item)
    return dict(data, hosts=hosts)


def _mig(src: schema.Source, value: str | list, entry: str) -> dict:
    """A ``mig:`` value -> model -> ``mig_layout.Layout``.

    The agent's ``[mig] layouts`` values (``MODEL:PROFILE=COUNT,...``),
    one or a list, checked by the agent's own parser against NVIDIA's
    profile tables.
    """
    try:
        return mig_layout.parse_layouts(
            [value] if isinstance(value, str) else value)
    except exception.InvalidOption as exc:
        raise src.fail(entry, '%r: %s' % (exc.kwargs['value'],
                                          exc.kwargs['reason']))


def _power(src: schema.Source, value: str | list, entry: str) -> dict:
    """A ``power:`` value -> model (or ``*``) -> power profile."""
    try:
        return power_policy.parse_profiles(
            [value] if isinstance(value, str) else value)
    except exception.InvalidOption as exc:
        raise src.fail(entry, '%r: %s' % (exc.kwargs['value'],
                                          exc.kwargs['reason']))


def _hosts(src: schema.Source, item: dict, entry: str,
           base: str) -> list[Host]:
    """The host of an entry, or its ``count`` hosts ``NAME-0001``...

    The XML of a host kind is parsed once; its hosts share the parsed
    records (each host copies what it changes).
    """
    count, name = item.get('count'), item['name']
    if count is None:
        return [_host(src, item, entry, base, name)]
    # the room the suffix takes depends on count: not in the schema
    digits = max(4, len(str(count)))
    room = schema.definition('name')['maxLength'] - digits - 1
    if len(name) > room:
        raise src.fail(entry + '.name', '%r is too long for %d hosts: use '
                       'at most %d characters (the simulator adds -%s)'
                       % (name, count, room, 'N' * digits))
    host = _host(src, item, entry, base, name)
    return [dataclasses.replace(host, name='%s-%0*d' % (name, digits, i))
            for i in range(1, count + 1)]


def _host_xml(src: schema.Source, item: dict, entry: str, base: str
              ) -> tuple[str, str]:
    """``(source, XML text)`` of a host given by libvirt XML."""
    if 'libvirt_xml_inline' in item:
        return '<inline>', item['libvirt_xml_inline']
    source = os.path.join(base, item['libvirt_xml'])
    try:
        with open(source, encoding='utf-8') as f:
            return source, f.read()
    except OSError as exc:
        raise src.fail(entry + '.libvirt_xml', 'cannot read %s (%s). '
                       'Paths are relative to the scenario file.'
                       % (source, exc.strerror or exc))


def _host(src: schema.Source, item: dict, entry: str, base: str,
          name: str) -> Host:
    generated = None
    layouts = {}
    if 'mig' in item:
        layouts = _mig(src, item['mig'], entry + '.mig')
    if isinstance(item.get('gpus'), list):
        generated = hostgen.parse(src, item['gpus'], entry + '.gpus',
                                  layouts, entry + '.mig')
        source, xml_text = '<generated>', generated.xml_text
        item = dict(item, nova_gpu_mode=generated.nova_gpu_mode,
                    enabled_mdev_types=generated.enabled_mdev_types)
    else:
        source, xml_text = _host_xml(src, item, entry, base)
    try:
        functions = host_xml.parse(xml_text)
    except ValueError as exc:
        raise src.fail(entry + '.libvirt_xml', 'bad host XML %s: %s. '
                       'Fix the XML (see the shipped scenarios/hosts/*.xml '
                       'for the libvirt test driver format).'
                       % (source, exc))
    host = Host(name=name, xml_text=xml_text, xml_source=source,
                pci_functions=functions,
                **{key: item[key] for key in _COPIED if key in item})
    host.mig_layouts = {m: lay.describe() for m, lay in layouts.items()}
    if generated is not None:
        host.mig_types = dict(generated.mig_types)
    if 'power' in item:
        host.power_profiles = _power(src, item['power'], entry + '.power')
        models = generated.models if generated else None
        for model in host.power_profiles:
            if models is not None and model != '*' and model not in models:
                raise src.fail(entry + '.power', 'power profile of GPU '
                               'model %s, which this host kind has no GPU '
                               'of (its GPUs: %s)' % (
                                   model, ', '.join(models)))
    host.enabled_mdev_types = _str_list(item.get('enabled_mdev_types'))
    host.pci_traits = _str_list(item.get('pci_traits'))
    if host.nova_gpu_mode == 'vgpu':
        _offered(src, host, entry, source)
    for key, example, nova in (('pci_resource_class', 'CUSTOM_GPU_H100',
                                ('PGPU', 'VGPU')),
                               ('vgpu_resource_class',
                                'CUSTOM_VGPU_A100_80GB_PCIE', ('VGPU',))):
        if key in item:
            # upper-cased first, as nova-compute reads it: a schema
            # pattern cannot say that
            rc = item[key].upper()
            if not rc.startswith('CUSTOM_') and rc not in nova:
                raise src.fail(entry + '.' + key, '%r is not a custom '
                               'resource class; use CUSTOM_<NAME> (e.g. '
                               '%s) or %s' % (rc, example, nova[0]))
            setattr(host, key, rc)
    host.aggregates = {
        str(agg): {str(k): str(v) for k, v in (metadata or {}).items()}
        for agg, metadata in (item.get('aggregates') or {}).items()}
    if generated is not None:
        host.gpus = generated.facts
        return host
    for address, facts in (item.get('gpus') or {}).items():
        gpu_entry = schema.entry_path([entry, 'gpus', address])
        addr = naming.normalize_pci_address(address)
        if host.function(addr) is None:
            raise src.fail(gpu_entry, 'the host XML %s has no PCI device '
                           '%s. Add a <device> for it or fix the address '
                           '(the XML has: %s).' % (
                               source, addr, ', '.join(
                                   f.address for f in functions) or
                               'no PCI devices'))
        try:
            # what the agent's simulated source will make of it
            simulated.gpu_from_entry(addr, facts)
        except (ValueError, TypeError) as exc:
            raise src.fail(gpu_entry, '%s. Fix the value (the GPU facts '
                           'are documented in scenarios/example.yaml).'
                           % exc)
        host.gpus[addr] = dict(facts)
    return host


#: host keys whose checked value is the Host field as it is
_COPIED = ('vcpus', 'memory_mb', 'disk_gb', 'cpu_allocation_ratio',
           'ram_allocation_ratio', 'disk_allocation_ratio', 'nova_gpu_mode',
           'agent_mode')


def _str_list(value: str | list | None) -> list[str]:
    """A schema ``text_list``: a list, or one comma-separated string."""
    if isinstance(value, str):
        return [v.strip() for v in value.split(',') if v.strip()]
    return list(value or [])


def _offered(src: schema.Source, host: Host, entry: str,
             source: str) -> None:
    """The mdev types vGPU mode enables are offered by the host XML."""
    if not host.enabled_mdev_types:
        raise src.fail(entry + '.enabled_mdev_types', 'nova_gpu_mode '
                       'vgpu needs the mdev types nova-compute enables '
                       '([devices] enabled_mdev_types), e.g. [nvidia-471]')
    offered = {t for f in host.pci_functions for t in f.mdev_types}
    for mdev_type in host.enabled_mdev_types:
        if mdev_type not in offered:
            raise src.fail(
                entry + '.enabled_mdev_types', 'mdev type %r is not '
                'offered by any device of %s (offered: %s). Add it to '
                'the XML <capability type="mdev_types"> or fix the name.'
                % (mdev_type, source, ', '.join(sorted(offered))
                   or 'none'))


def _flavor(item: dict) -> Flavor:
    """A flavor (checked by the schema); extra spec values as strings."""
    extra = {}
    for key, value in (item.get('extra_specs') or {}).items():
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        extra[str(key)] = str(value)
    return Flavor(name=item['name'], vcpus=item['vcpus'],
                  ram_mb=item['ram_mb'], disk_gb=item.get('disk_gb', 0),
                  extra_specs=extra)
