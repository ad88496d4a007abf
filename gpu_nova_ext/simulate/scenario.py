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

"""Simulator scenarios: load a YAML file, check it, return plain records.

Everything that can be checked without Nova is checked here, before any
service starts: unknown keys, types, host XML that does not parse, GPUs
that the host XML does not have, boots of unknown flavors, events on
unknown hosts or GPUs.  What needs Nova (extra spec values, nova.conf
options, PCI aliases) is checked by :mod:`gpu_nova_ext.simulate.nova_config`
and :mod:`gpu_nova_ext.simulate.nova_flavors`,
also before the first boot.  Every problem is a
:class:`gpu_nova_ext.exception.ScenarioError` naming the file, the entry
and the fix.

The format is documented by the shipped, commented
``gpu_nova_ext/simulate/scenarios/example.yaml``.
"""
import dataclasses
import os
from typing import Any

import yaml

from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext.agent import power_policy
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import simulated
from gpu_nova_ext import safe_yaml
from gpu_nova_ext.simulate import checks
from gpu_nova_ext.simulate import conf_keys
from gpu_nova_ext.simulate import host_xml
from gpu_nova_ext.simulate import hostgen
from gpu_nova_ext.simulate import quotas as sim_quotas
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import reservations as sim_reservations
from gpu_nova_ext.simulate import steps

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            'scenarios')
DEFAULT_SCENARIO = os.path.join(SCENARIO_DIR, 'default.yaml')

TOP_KEYS = ('description', 'nova_conf', 'hosts', 'flavors', 'boots',
            'workload', 'step_seconds', 'remediation', 'agent_conf',
            'reservations', 'quotas', 'placement_conf', 'mig_variants')
HOST_KEYS = ('name', 'count', 'libvirt_xml', 'libvirt_xml_inline', 'vcpus',
             'memory_mb', 'disk_gb', 'cpu_allocation_ratio',
             'ram_allocation_ratio', 'disk_allocation_ratio',
             'nova_gpu_mode', 'enabled_mdev_types', 'pci_resource_class',
             'vgpu_resource_class',
             'pci_traits', 'agent_mode', 'aggregates', 'gpus', 'mig',
             'power')
FLAVOR_KEYS = ('name', 'vcpus', 'ram_mb', 'disk_gb', 'extra_specs')
#: Most hosts of one kind (``count:``) and in a scenario.
MAX_HOSTS = 20000
#: Simulated seconds one step (a boot, an event, a delete) takes.
DEFAULT_STEP_SECONDS = 10.0
#: What a scenario GPU entry (and a ``simulated_gpus_file`` entry) may hold.
GPU_KEYS = ('name', 'memory_mib', 'uuid', 'serial', 'vendor', 'numa_node',
            'driver_version', 'cuda_cc', 'mig', 'slowdown_temperature_c',
            'shutdown_temperature_c', 'power_limit_w', 'health', 'metrics',
            'vgpu_types')
NOVA_GPU_MODES = ('vgpu', 'pci', 'none')
HEALTH_STATES = simulated.HEALTH_STATES
AGENT_MODES = ('annotate', 'inventory')


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
    check = checks.Checker(path)
    try:
        with open(path, encoding='utf-8') as f:
            data = safe_yaml.load(f)
    except FileNotFoundError:
        raise check.fail('file', 'no such file. Pass an existing scenario '
                         'file, or no argument for the shipped one.')
    except OSError as exc:
        raise check.fail('file', 'cannot read it: %s' % exc)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = (' at line %d, column %d' % (mark.line + 1, mark.column + 1)
                 if mark else '')
        raise check.fail('file', 'not valid YAML%s: %s'
                         % (where, getattr(exc, 'problem', None) or exc))
    return from_dict(data, path, mig_variant)


def _mig_variants(check: checks.Checker, data: dict) -> dict:
    """``mig_variants:`` checked: names, host kinds, their layouts."""
    variants = check.mapping(data.get('mig_variants') or {}, 'mig_variants')
    kinds = {item.get('name') for item in data.get('hosts') or []
             if isinstance(item, dict)}
    out = {}
    for name, kinds_map in variants.items():
        entry = 'mig_variants[%s]' % name
        check.name(name, entry)
        kinds_map = check.mapping(kinds_map, entry)
        for kind, value in kinds_map.items():
            if kind not in kinds:
                raise check.fail('%s.%s' % (entry, kind), 'no host kind '
                                 '%r in hosts: (host kinds: %s)' % (
                                     kind, ', '.join(sorted(
                                         str(k) for k in kinds))))
            _mig(check, value, '%s.%s' % (entry, kind))
        out[str(name)] = dict(kinds_map)
    return out


def _with_variant(check: checks.Checker, data: dict, variants: dict,
                  name: str) -> dict:
    """``data`` with the ``mig:`` of variant ``name`` on its host kinds."""
    if name not in variants:
        raise check.fail('mig_variants', 'no MIG variant %r (variants: %s)'
                         % (name, ', '.join(sorted(variants)) or 'none'))
    hosts = []
    for item in data.get('hosts') or []:
        if isinstance(item, dict) and item.get('name') in variants[name]:
            item = dict(item, mig=variants[name][item['name']])
        hosts.append(item)
    return dict(data, hosts=hosts)


def _mig(check: checks.Checker, value: Any, entry: str) -> dict:
    """A ``mig:`` value -> model -> ``mig_layout.Layout``.

    The agent's ``[mig] layouts`` values (``MODEL:PROFILE=COUNT,...``),
    one or a list, checked by the agent's own parser against NVIDIA's
    profile tables.
    """
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise check.fail(entry, 'expected a layout MODEL:PROFILE=COUNT[,'
                         'PROFILE=COUNT...] (as [mig] layouts), or a list '
                         'of them, got %s' % checks.kind(value))
    values = [check.string(v, entry) for v in values]
    try:
        return mig_layout.parse_layouts(values)
    except exception.InvalidOption as exc:
        raise check.fail(entry, '%r: %s' % (exc.kwargs['value'],
                                            exc.kwargs['reason']))


def _power(check: checks.Checker, value: Any, entry: str) -> dict:
    """A ``power:`` value -> model (or ``*``) -> power profile."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise check.fail(entry, 'expected MODEL:PROFILE (as [power] '
                         'profiles), or a list of them, got %s'
                         % checks.kind(value))
    values = [check.string(v, entry) for v in values]
    try:
        return power_policy.parse_profiles(values)
    except exception.InvalidOption as exc:
        raise check.fail(entry, '%r: %s' % (exc.kwargs['value'],
                                            exc.kwargs['reason']))


def from_dict(data: Any, path: str,
              mig_variant: str | None = None) -> Scenario:
    """Check parsed scenario data.

    ``path`` names the file in errors and anchors relative ``libvirt_xml``
    paths.
    """
    check = checks.Checker(path)
    data = check.mapping(data, 'top level')
    check.keys(data, TOP_KEYS, 'top level')
    nova_conf = conf_keys.nova_conf(check, data.get('nova_conf') or {})
    variants = _mig_variants(check, data)
    if mig_variant is not None:
        data = _with_variant(check, data, variants, mig_variant)
    hosts_data = check.required(data, 'hosts', 'top level')
    if not isinstance(hosts_data, list) or not hosts_data:
        raise check.fail('hosts', 'expected a non-empty list of hosts')
    base = os.path.dirname(path)
    hosts: list[Host] = []
    names: set[str] = set()
    for i, item in enumerate(hosts_data):
        for host in _hosts(check, item, 'hosts[%d]' % i, base):
            if host.name in names:
                raise check.fail('hosts[%d]' % i, 'host name %r is used '
                                 'twice; host names must be unique'
                                 % host.name)
            names.add(host.name)
            hosts.append(host)
        if len(hosts) > MAX_HOSTS:
            raise check.fail('hosts[%d]' % i, 'more than %d hosts; '
                             'simulate a part of the cloud' % MAX_HOSTS)
    flavors_data = check.required(data, 'flavors', 'top level')
    if not isinstance(flavors_data, list) or not flavors_data:
        raise check.fail('flavors', 'expected a non-empty list of flavors')
    flavors = {}
    for i, item in enumerate(flavors_data):
        flavor = _flavor(check, item, 'flavors[%d]' % i)
        if flavor.name in flavors:
            raise check.fail('flavors[%d]' % i, 'flavor name %r is used '
                             'twice' % flavor.name)
        flavors[flavor.name] = flavor
    scenario = Scenario(
        path=path, description=str(data.get('description') or '').strip(),
        nova_conf=nova_conf, hosts=hosts, flavors=flavors, steps=[],
        mig_variants=variants, mig_variant=mig_variant)
    if 'step_seconds' in data:
        scenario.step_seconds = check.number(
            data['step_seconds'], 'step_seconds', minimum=0.001,
            maximum=86400.0)
    scenario.agent_conf = conf_keys.agent_conf(
        check, data.get('agent_conf') or {})
    scenario.placement_conf, scenario.recommended = (
        conf_keys.placement_conf(check, data.get('placement_conf'),
                                 len(hosts)))
    if data.get('remediation') is not None:
        scenario.remediation = remediation_spec.parse(
            check, data['remediation'])
    scenario.reservations = sim_reservations.parse(
        check, data.get('reservations'), scenario)
    scenario.quotas = sim_quotas.parse(check, data.get('quotas'))
    boots_data = data.get('boots') or []
    if not isinstance(boots_data, list):
        raise check.fail('boots', 'expected a list of boots and events')
    if not boots_data and not data.get('workload'):
        raise check.fail('top level', 'give boots: (a list of boots and '
                         'events), a workload: generator, or both')
    scenario.steps = [steps.parse_step(check, item, i, scenario)
                      for i, item in enumerate(boots_data)]
    if data.get('workload'):
        scenario.workload = steps.parse_workload(check, data['workload'],
                                                 scenario)
    return scenario


def _hosts(check: checks.Checker, item: Any, entry: str,
           base: str) -> list[Host]:
    """The host of an entry, or its ``count`` hosts ``NAME-0001``...

    The XML of a host kind is parsed once; its hosts share the parsed
    records (each host copies what it changes).
    """
    item = check.mapping(item, entry)
    count = None
    if 'count' in item:
        count = check.integer(item['count'], entry + '.count', 1,
                              MAX_HOSTS)
    digits = max(4, len(str(count))) if count else 0
    name = check.name(check.required(item, 'name', entry), entry + '.name',
                      room=digits + 1 if count else 0)
    host = _host(check, item, '%s (%s)' % (entry, name), base, name)
    if count is None:
        return [host]
    return [dataclasses.replace(host, name='%s-%0*d' % (name, digits, i))
            for i in range(1, count + 1)]


def _host(check: checks.Checker, item: dict, entry: str, base: str,
          name: str) -> Host:
    check.keys(item, HOST_KEYS, entry)
    gpu_list = isinstance(item.get('gpus'), list)
    given = [k for k in ('libvirt_xml', 'libvirt_xml_inline') if k in item]
    if gpu_list and given:
        raise check.fail(entry, 'give either gpus: as a list of GPU kinds '
                         '(the simulator writes the host XML) or %s, not '
                         'both' % given[0])
    generated = None
    layouts = {}
    if 'mig' in item:
        layouts = _mig(check, item['mig'], entry + '.mig')
        if not gpu_list:
            raise check.fail(entry + '.mig', 'a MIG layout needs gpus: as a '
                             'list of GPU kinds (the simulator writes the '
                             'host XML of the laid-out GPUs)')
    if gpu_list:
        generated = hostgen.parse(check, item['gpus'], entry + '.gpus',
                                  layouts, entry + '.mig')
        source = '<generated>'
        xml_text = generated.xml_text
    elif len(given) != 1:
        raise check.fail(entry, 'give exactly one of libvirt_xml (a file, '
                         'relative to the scenario), libvirt_xml_inline, or '
                         'gpus: as a list of GPU kinds')
    elif 'libvirt_xml' in item:
        rel = check.string(item['libvirt_xml'], entry + '.libvirt_xml')
        source = os.path.join(base, rel)
        try:
            with open(source, encoding='utf-8') as f:
                xml_text = f.read()
        except OSError as exc:
            raise check.fail(entry + '.libvirt_xml', 'cannot read %s (%s). '
                             'Paths are relative to the scenario file.'
                             % (source, exc.strerror or exc))
    elif 'libvirt_xml_inline' in item:
        source = '<inline>'
        xml_text = check.string(item['libvirt_xml_inline'],
                                entry + '.libvirt_xml_inline')
    try:
        functions = host_xml.parse(xml_text)
    except ValueError as exc:
        raise check.fail(entry + '.libvirt_xml', 'bad host XML %s: %s. '
                         'Fix the XML (see the shipped scenarios/hosts/*.xml '
                         'for the libvirt test driver format).'
                         % (source, exc))
    host = Host(name=name, xml_text=xml_text, xml_source=source,
                pci_functions=functions)
    host.mig_layouts = {m: lay.describe() for m, lay in layouts.items()}
    if generated is not None:
        host.mig_types = dict(generated.mig_types)
    if 'power' in item:
        host.power_profiles = _power(check, item['power'], entry + '.power')
        models = generated.models if generated else None
        for model in host.power_profiles:
            if models is not None and model != '*' and model not in models:
                raise check.fail(entry + '.power', 'power profile of GPU '
                                 'model %s, which this host kind has no GPU '
                                 'of (its GPUs: %s)' % (
                                     model, ', '.join(models)))
    for key in ('vcpus', 'memory_mb', 'disk_gb'):
        if key in item:
            setattr(host, key, check.integer(item[key], '%s.%s'
                                             % (entry, key), minimum=1))
    for key in ('cpu_allocation_ratio', 'ram_allocation_ratio',
                'disk_allocation_ratio'):
        if key in item:
            setattr(host, key, check.number(
                item[key], '%s.%s' % (entry, key), minimum=0.0,
                maximum=1000.0, exclusive_minimum=True))
    if generated is not None:
        for key in ('nova_gpu_mode', 'enabled_mdev_types'):
            if key in item:
                raise check.fail('%s.%s' % (entry, key), 'follows from '
                                 'gpus: (their mode); remove it')
        item = dict(item, nova_gpu_mode=generated.nova_gpu_mode,
                    enabled_mdev_types=generated.enabled_mdev_types)
    host.nova_gpu_mode = check.choice(
        item.get('nova_gpu_mode', 'vgpu'), NOVA_GPU_MODES,
        entry + '.nova_gpu_mode')
    host.agent_mode = check.choice(item.get('agent_mode', 'annotate'),
                                   AGENT_MODES, entry + '.agent_mode')
    host.enabled_mdev_types = check.str_list(
        item.get('enabled_mdev_types') or [], entry + '.enabled_mdev_types')
    if host.nova_gpu_mode == 'vgpu':
        if not host.enabled_mdev_types:
            raise check.fail(entry + '.enabled_mdev_types', 'nova_gpu_mode '
                             'vgpu needs the mdev types nova-compute '
                             'enables ([devices] enabled_mdev_types), e.g. '
                             '[nvidia-471]')
        offered = {t for f in functions for t in f.mdev_types}
        for mdev_type in host.enabled_mdev_types:
            if mdev_type not in offered:
                raise check.fail(
                    entry + '.enabled_mdev_types', 'mdev type %r is not '
                    'offered by any device of %s (offered: %s). Add it to '
                    'the XML <capability type="mdev_types"> or fix the name.'
                    % (mdev_type, source, ', '.join(sorted(offered))
                       or 'none'))
    for key, example, nova in (('pci_resource_class', 'CUSTOM_GPU_H100',
                                ('PGPU', 'VGPU')),
                               ('vgpu_resource_class',
                                'CUSTOM_VGPU_A100_80GB_PCIE', ('VGPU',))):
        if key in item:
            rc = check.string(item[key], entry + '.' + key).upper()
            if not rc.startswith('CUSTOM_') and rc not in nova:
                raise check.fail(entry + '.' + key, '%r is not a custom '
                                 'resource class; use CUSTOM_<NAME> (e.g. '
                                 '%s) or %s' % (rc, example, nova[0]))
            setattr(host, key, rc)
    host.pci_traits = check.str_list(item.get('pci_traits') or [],
                                     entry + '.pci_traits')
    aggregates = check.mapping(item.get('aggregates') or {},
                               entry + '.aggregates')
    for agg_name, metadata in aggregates.items():
        agg_entry = '%s.aggregates[%s]' % (entry, agg_name)
        metadata = check.mapping(metadata or {}, agg_entry)
        for key, value in metadata.items():
            if not isinstance(value, (str, int, float)) or isinstance(
                    value, bool):
                raise check.fail('%s.%s' % (agg_entry, key),
                                 'aggregate metadata values are strings or '
                                 'numbers, got %s' % checks.kind(value))
            check.finite_values(value, '%s.%s' % (agg_entry, key))
        host.aggregates[str(agg_name)] = {str(k): str(v)
                                          for k, v in metadata.items()}
    if generated is not None:
        host.gpus = generated.facts
        return host
    gpus = check.mapping(item.get('gpus') or {}, entry + '.gpus')
    for address, facts in gpus.items():
        gpu_entry = '%s.gpus[%s]' % (entry, address)
        addr = check.pci_address(address, gpu_entry)
        func = host.function(addr)
        if func is None:
            raise check.fail(gpu_entry, 'the host XML %s has no PCI device '
                             '%s. Add a <device> for it or fix the address '
                             '(the XML has: %s).' % (
                                 source, addr, ', '.join(
                                     f.address for f in functions) or
                                 'no PCI devices'))
        host.gpus[addr] = _gpu_facts(check, facts, addr, gpu_entry)
    return host


def _gpu_facts(check: checks.Checker, facts: Any, address: str,
               entry: str) -> dict[str, Any]:
    facts = check.mapping(facts, entry)
    check.keys(facts, GPU_KEYS, entry)
    check.finite_values(facts, entry)
    for key, value in (facts.get('metrics') or {}).items():
        check.number(value, '%s.metrics.%s' % (entry, key),
                     minimum=-273.0)
    try:
        # what the agent's simulated source will make of it
        simulated.gpu_from_entry(address, facts)
    except (ValueError, TypeError) as exc:
        raise check.fail(entry, '%s. Fix the value (the GPU facts are '
                         'documented in scenarios/example.yaml).' % exc)
    return dict(facts)


def _flavor(check: checks.Checker, item: Any, entry: str) -> Flavor:
    item = check.mapping(item, entry)
    name = check.name(check.required(item, 'name', entry), entry + '.name')
    entry = '%s (%s)' % (entry, name)
    check.keys(item, FLAVOR_KEYS, entry)
    specs = check.mapping(item.get('extra_specs') or {},
                          entry + '.extra_specs')
    extra = {}
    for key, value in specs.items():
        if isinstance(value, bool):
            value = 'true' if value else 'false'
        if not isinstance(value, (str, int, float)):
            raise check.fail('%s.extra_specs[%s]' % (entry, key),
                             'extra spec values are strings, got %s'
                             % checks.kind(value))
        check.finite_values(value, '%s.extra_specs[%s]' % (entry, key))
        extra[str(key)] = str(value)
    return Flavor(
        name=name,
        vcpus=check.integer(check.required(item, 'vcpus', entry),
                            entry + '.vcpus', 1),
        ram_mb=check.integer(check.required(item, 'ram_mb', entry),
                             entry + '.ram_mb', 1),
        disk_gb=check.integer(item.get('disk_gb', 0), entry + '.disk_gb'),
        extra_specs=extra)
