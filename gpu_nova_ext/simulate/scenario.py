"""Simulator scenarios: load a YAML file, check it, return plain records.

Everything that can be checked without Nova is checked here, before any
service starts: unknown keys, types, host XML that does not parse, GPUs
that the host XML does not have, boots of unknown flavors, events on
unknown hosts or GPUs.  What needs Nova (extra spec values, nova.conf
options, PCI aliases) is checked by :mod:`gpu_nova_ext.simulate.nova_env`,
also before the first boot.  Every problem is a
:class:`gpu_nova_ext.exception.ScenarioError` naming the file, the entry
and the fix.

The format is documented by the shipped, commented
``gpu_nova_ext/simulate/scenarios/example.yaml``.
"""
import dataclasses
import os
from typing import Any
from xml.etree import ElementTree

import yaml

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import simulated
from gpu_nova_ext import naming
from gpu_nova_ext import safe_yaml

SCENARIO_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                            'scenarios')
DEFAULT_SCENARIO = os.path.join(SCENARIO_DIR, 'default.yaml')

TOP_KEYS = ('description', 'nova_conf', 'hosts', 'flavors', 'boots')
HOST_KEYS = ('name', 'libvirt_xml', 'libvirt_xml_inline', 'vcpus',
             'memory_mb', 'disk_gb', 'cpu_allocation_ratio',
             'ram_allocation_ratio', 'disk_allocation_ratio',
             'nova_gpu_mode', 'enabled_mdev_types', 'pci_resource_class',
             'pci_traits', 'agent_mode', 'aggregates', 'gpus')
FLAVOR_KEYS = ('name', 'vcpus', 'ram_mb', 'disk_gb', 'extra_specs')
BOOT_KEYS = ('flavor', 'count', 'name')
EVENT_KEYS = ('host', 'gpu', 'health', 'reasons', 'metrics')
#: What a scenario GPU entry (and a ``simulated_gpus_file`` entry) may hold.
GPU_KEYS = ('name', 'memory_mib', 'uuid', 'serial', 'vendor', 'numa_node',
            'driver_version', 'cuda_cc', 'mig', 'slowdown_temperature_c',
            'shutdown_temperature_c', 'power_limit_w', 'health', 'metrics',
            'vgpu_types')
NOVA_GPU_MODES = ('vgpu', 'pci', 'none')
HEALTH_STATES = simulated.HEALTH_STATES
AGENT_MODES = ('annotate', 'inventory')
# PCI classes of GPUs (display controllers), as the agent sees them.
GPU_PCI_CLASSES = ('0x0300', '0x0302', '0x0380')


@dataclasses.dataclass
class PciFunction:
    """A PCI function of a host XML (libvirt test driver ``<device>``)."""

    address: str
    vendor_id: str
    product_id: str
    pci_class: str
    numa_node: int | None = None
    mdev_types: list[str] = dataclasses.field(default_factory=list)

    @property
    def is_display(self) -> bool:
        return self.pci_class[:6] in GPU_PCI_CLASSES


@dataclasses.dataclass
class Host:
    name: str
    xml_text: str                 # the libvirt test driver XML
    xml_source: str               # file it came from, or "<inline>"
    pci_functions: list[PciFunction]
    vcpus: int = 64
    memory_mb: int = 262144
    disk_gb: int = 2000
    cpu_allocation_ratio: float = 4.0
    ram_allocation_ratio: float = 1.0
    disk_allocation_ratio: float = 1.0
    nova_gpu_mode: str = 'vgpu'
    enabled_mdev_types: list[str] = dataclasses.field(default_factory=list)
    pci_resource_class: str | None = None
    pci_traits: list[str] = dataclasses.field(default_factory=list)
    agent_mode: str = 'annotate'
    #: host aggregate name -> metadata (e.g. weigher multipliers)
    aggregates: dict[str, dict[str, str]] = dataclasses.field(
        default_factory=dict)
    gpus: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)

    def function(self, address: str) -> PciFunction | None:
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
class Boot:
    flavor: str
    count: int = 1
    name: str | None = None       # server name prefix; the flavor's if None
    index: int = 0                # position in ``boots:``


@dataclasses.dataclass
class Event:
    host: str
    gpu: str
    health: str | None = None
    reasons: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    index: int = 0


@dataclasses.dataclass
class Scenario:
    path: str
    description: str
    nova_conf: dict[str, dict[str, Any]]
    hosts: list[Host]
    flavors: dict[str, Flavor]
    steps: list[Boot | Event]

    def host(self, name: str) -> Host | None:
        for host in self.hosts:
            if host.name == name:
                return host
        return None

    def error(self, entry: str, reason: str) -> exception.ScenarioError:
        return exception.ScenarioError(file=self.path, entry=entry,
                                       reason=reason)


class _Checker:
    """Type checks that raise ScenarioError naming file and entry."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, entry: str, reason: str) -> exception.ScenarioError:
        return exception.ScenarioError(file=self.path, entry=entry,
                                       reason=reason)

    def mapping(self, value: Any, entry: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(entry, 'expected a mapping (key: value), got %s'
                            % _kind(value))
        return value

    def keys(self, value: dict, allowed: tuple, entry: str) -> None:
        for key in value:
            if key not in allowed:
                raise self.fail(
                    entry, 'unknown key %r. Allowed keys: %s. Fix the '
                    'spelling or remove it.' % (key, ', '.join(allowed)))

    def required(self, value: dict, key: str, entry: str) -> Any:
        if key not in value or value[key] is None:
            raise self.fail(entry, 'missing required key %r' % key)
        return value[key]

    def string(self, value: Any, entry: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(entry, 'expected a non-empty string, got %s'
                            % _kind(value))
        return value

    def integer(self, value: Any, entry: str, minimum: int = 0) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(entry, 'expected an integer, got %s'
                            % _kind(value))
        if value < minimum:
            raise self.fail(entry, 'must be at least %d, got %d'
                            % (minimum, value))
        return value

    def number(self, value: Any, entry: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(entry, 'expected a number, got %s'
                            % _kind(value))
        return float(value)

    def choice(self, value: Any, choices: tuple, entry: str) -> str:
        if value not in choices:
            raise self.fail(entry, '%r is not one of %s'
                            % (value, ', '.join(choices)))
        return value

    def str_list(self, value: Any, entry: str) -> list[str]:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(',') if v.strip()]
        if not isinstance(value, list):
            raise self.fail(entry, 'expected a list of strings, got %s'
                            % _kind(value))
        return [self.string(v, '%s[%d]' % (entry, i))
                for i, v in enumerate(value)]

    def pci_address(self, value: Any, entry: str) -> str:
        try:
            return naming.normalize_pci_address(str(value))
        except ValueError:
            raise self.fail(entry, '%r is not a PCI address; write it like '
                            '"0000:3b:00.0" (quoted)' % (value,))


def _kind(value: Any) -> str:
    if value is None:
        return 'nothing'
    return '%s %r' % (type(value).__name__, value)


def parse_host_xml(text: str) -> list[PciFunction]:
    """The PCI functions of a libvirt test driver host XML.

    Raises ValueError (with the position) when the XML does not parse or
    is not a test driver ``<node>`` document.
    """
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        line, col = exc.position
        raise ValueError('not well-formed XML at line %d, column %d (%s)'
                         % (line, col, exc.msg if hasattr(exc, 'msg')
                            else exc))
    if root.tag != 'node':
        raise ValueError('the root element is <%s>; a libvirt test driver '
                         'host file has <node> with <device> children'
                         % root.tag)
    functions = []
    for device in root.findall('device'):
        cap = device.find("capability[@type='pci']")
        if cap is None:
            continue
        try:
            address = '%04x:%02x:%02x.%x' % tuple(
                int(cap.findtext(tag), 0)
                for tag in ('domain', 'bus', 'slot', 'function'))
        except (TypeError, ValueError):
            raise ValueError('device %s: <domain>, <bus>, <slot> and '
                             '<function> must be numbers'
                             % device.findtext('name'))
        vendor = cap.find('vendor')
        product = cap.find('product')
        numa = cap.find('numa')
        functions.append(PciFunction(
            address=address,
            vendor_id=_hex_id(vendor),
            product_id=_hex_id(product),
            pci_class=(cap.findtext('class') or '0x000000').strip(),
            numa_node=(int(numa.get('node')) if numa is not None
                       and numa.get('node') is not None else None),
            mdev_types=[t.get('id') for t in cap.findall(
                "capability[@type='mdev_types']/type")]))
    return functions


def _hex_id(element) -> str:
    if element is None or not element.get('id'):
        return ''
    return '%04x' % int(element.get('id'), 16)


def load(path: str | None = None) -> Scenario:
    """Read and check a scenario file (the shipped default when None)."""
    path = os.path.abspath(path or DEFAULT_SCENARIO)
    check = _Checker(path)
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
    return from_dict(data, path)


def from_dict(data: Any, path: str) -> Scenario:
    """Check parsed scenario data.

    ``path`` names the file in errors and anchors relative ``libvirt_xml``
    paths.
    """
    check = _Checker(path)
    data = check.mapping(data, 'top level')
    check.keys(data, TOP_KEYS, 'top level')
    nova_conf = _nova_conf(check, data.get('nova_conf') or {})
    hosts_data = check.required(data, 'hosts', 'top level')
    if not isinstance(hosts_data, list) or not hosts_data:
        raise check.fail('hosts', 'expected a non-empty list of hosts')
    base = os.path.dirname(path)
    hosts = []
    for i, item in enumerate(hosts_data):
        host = _host(check, item, 'hosts[%d]' % i, base)
        if any(h.name == host.name for h in hosts):
            raise check.fail('hosts[%d]' % i, 'host name %r is used twice; '
                             'host names must be unique' % host.name)
        hosts.append(host)
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
    boots_data = check.required(data, 'boots', 'top level')
    if not isinstance(boots_data, list) or not boots_data:
        raise check.fail('boots', 'expected a non-empty list of boots and '
                         'events')
    steps = []
    for i, item in enumerate(boots_data):
        steps.append(_step(check, item, i, hosts, flavors))
    return Scenario(path=path,
                    description=str(data.get('description') or '').strip(),
                    nova_conf=nova_conf, hosts=hosts, flavors=flavors,
                    steps=steps)


def _nova_conf(check: _Checker, value: Any) -> dict[str, dict[str, Any]]:
    value = check.mapping(value, 'nova_conf')
    out = {}
    for group, opts in value.items():
        entry = 'nova_conf.%s' % group
        opts = check.mapping(opts, entry)
        out[str(group)] = {str(k): v for k, v in opts.items()}
    return out


def _host(check: _Checker, item: Any, entry: str, base: str) -> Host:
    item = check.mapping(item, entry)
    name = check.string(check.required(item, 'name', entry), entry + '.name')
    entry = '%s (%s)' % (entry, name)
    check.keys(item, HOST_KEYS, entry)
    if ('libvirt_xml' in item) == ('libvirt_xml_inline' in item):
        raise check.fail(entry, 'give exactly one of libvirt_xml (a file, '
                         'relative to the scenario) or libvirt_xml_inline')
    if 'libvirt_xml' in item:
        rel = check.string(item['libvirt_xml'], entry + '.libvirt_xml')
        source = os.path.join(base, rel)
        try:
            with open(source, encoding='utf-8') as f:
                xml_text = f.read()
        except OSError as exc:
            raise check.fail(entry + '.libvirt_xml', 'cannot read %s (%s). '
                             'Paths are relative to the scenario file.'
                             % (source, exc.strerror or exc))
    else:
        source = '<inline>'
        xml_text = check.string(item['libvirt_xml_inline'],
                                entry + '.libvirt_xml_inline')
    try:
        functions = parse_host_xml(xml_text)
    except ValueError as exc:
        raise check.fail(entry + '.libvirt_xml', 'bad host XML %s: %s. '
                         'Fix the XML (see the shipped scenarios/hosts/*.xml '
                         'for the libvirt test driver format).'
                         % (source, exc))
    host = Host(name=name, xml_text=xml_text, xml_source=source,
                pci_functions=functions)
    for key in ('vcpus', 'memory_mb', 'disk_gb'):
        if key in item:
            setattr(host, key, check.integer(item[key], '%s.%s'
                                             % (entry, key), minimum=1))
    for key in ('cpu_allocation_ratio', 'ram_allocation_ratio',
                'disk_allocation_ratio'):
        if key in item:
            setattr(host, key, check.number(item[key], '%s.%s'
                                            % (entry, key)))
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
    if 'pci_resource_class' in item:
        rc = check.string(item['pci_resource_class'],
                          entry + '.pci_resource_class').upper()
        if not rc.startswith('CUSTOM_') and rc not in ('PGPU', 'VGPU'):
            raise check.fail(entry + '.pci_resource_class', '%r is not a '
                             'custom resource class; use CUSTOM_<NAME> '
                             '(e.g. CUSTOM_GPU_H100) or PGPU' % rc)
        host.pci_resource_class = rc
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
                                 'numbers, got %s' % _kind(value))
        host.aggregates[str(agg_name)] = {str(k): str(v)
                                          for k, v in metadata.items()}
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


def _gpu_facts(check: _Checker, facts: Any, address: str,
               entry: str) -> dict[str, Any]:
    facts = check.mapping(facts, entry)
    check.keys(facts, GPU_KEYS, entry)
    try:
        # what the agent's simulated source will make of it
        simulated.gpu_from_entry(address, facts)
    except (ValueError, TypeError) as exc:
        raise check.fail(entry, '%s. Fix the value (the GPU facts are '
                         'documented in scenarios/example.yaml).' % exc)
    return dict(facts)


def _flavor(check: _Checker, item: Any, entry: str) -> Flavor:
    item = check.mapping(item, entry)
    name = check.string(check.required(item, 'name', entry), entry + '.name')
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
                             % _kind(value))
        extra[str(key)] = str(value)
    return Flavor(
        name=name,
        vcpus=check.integer(check.required(item, 'vcpus', entry),
                            entry + '.vcpus', 1),
        ram_mb=check.integer(check.required(item, 'ram_mb', entry),
                             entry + '.ram_mb', 1),
        disk_gb=check.integer(item.get('disk_gb', 0), entry + '.disk_gb'),
        extra_specs=extra)


def _step(check: _Checker, item: Any, index: int, hosts: list[Host],
          flavors: dict[str, Flavor]) -> Boot | Event:
    entry = 'boots[%d]' % index
    item = check.mapping(item, entry)
    if 'event' in item:
        if len(item) != 1:
            raise check.fail(entry, 'an event entry holds only "event:"; '
                             'put boots in their own entries')
        return _event(check, item['event'], entry + '.event', index, hosts)
    check.keys(item, BOOT_KEYS, entry)
    flavor = check.string(check.required(item, 'flavor', entry),
                          entry + '.flavor')
    if flavor not in flavors:
        raise check.fail(entry + '.flavor', 'unknown flavor %r. Define it '
                         'under flavors: (defined: %s).'
                         % (flavor, ', '.join(flavors)))
    name = item.get('name')
    if name is not None:
        name = check.string(name, entry + '.name')
    return Boot(flavor=flavor,
                count=check.integer(item.get('count', 1), entry + '.count',
                                    1),
                name=name, index=index)


def _event(check: _Checker, item: Any, entry: str, index: int,
           hosts: list[Host]) -> Event:
    item = check.mapping(item, entry)
    check.keys(item, EVENT_KEYS, entry)
    host_name = check.string(check.required(item, 'host', entry),
                             entry + '.host')
    host = next((h for h in hosts if h.name == host_name), None)
    if host is None:
        raise check.fail(entry + '.host', 'unknown host %r (hosts: %s)'
                         % (host_name, ', '.join(h.name for h in hosts)))
    gpu = check.pci_address(check.required(item, 'gpu', entry),
                            entry + '.gpu')
    func = host.function(gpu)
    if func is None or not func.is_display and gpu not in host.gpus:
        raise check.fail(entry + '.gpu', 'host %s has no GPU %s (GPUs: %s)'
                         % (host_name, gpu, ', '.join(
                             f.address for f in host.pci_functions
                             if f.is_display)))
    if 'health' not in item and 'metrics' not in item:
        raise check.fail(entry, 'an event changes "health" and/or '
                         '"metrics" of a GPU; give at least one')
    event = Event(host=host_name, gpu=gpu, index=index)
    if 'health' in item:
        event.health = check.choice(item['health'], HEALTH_STATES,
                                    entry + '.health')
    event.reasons = check.str_list(item.get('reasons') or [],
                                   entry + '.reasons')
    metrics = check.mapping(item.get('metrics') or {}, entry + '.metrics')
    event.metrics = {str(k): check.number(v, '%s.metrics.%s' % (entry, k))
                     for k, v in metrics.items()}
    return event
