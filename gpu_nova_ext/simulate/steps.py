# SPDX-License-Identifier: Apache-2.0

"""The steps of a scenario: boots, events, deletes, and the workload.

``boots:`` lists what happens in order, one step after another (each
step takes ``step_seconds`` of simulated time):

* a boot ``{flavor, count, name, lifetime, metadata, project, host}``:
  ``count`` servers, deleted again ``lifetime`` steps after they were
  booted when given, with Nova server ``metadata`` (remediation's
  opt-out), asked for ``host`` when given (as ``openstack server create
  --host``: Placement in its tree, every filter still runs);
* an event ``{event: {host, gpu, health, reasons, metrics, xids}}``
  changes what the GPU reports: ``health`` as given, ``metrics`` and
  ``xids`` (NVIDIA XID events) through the agent's health judge
  (:mod:`gpu_nova_ext.simulate.agent_health`);
  ``{event: {host, agent: down|up}}`` stops or restarts the host's agent
  (its state then ages out after ``state_ttl``);
* a delete ``{delete: NAME_OR_PREFIX}`` deletes the server of that name,
  or every server whose name starts with it;
* a roll-out ``{rollout: {driver, max_unavailable, hosts, model,
  upgrade_steps}}`` upgrades the GPU driver of the hosts in waves while
  the steps after it run (:mod:`gpu_nova_ext.simulate.rollout`).

``workload:`` then generates boots until its stop condition: flavors drawn
by weight from a seeded random generator, each with an optional lifetime
drawn between ``min`` and ``max`` steps.
"""
import dataclasses
from typing import Any

from gpu_nova_ext import naming
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import schema

#: what an agent event does (the scenario schema reads it)
AGENT_STATES = ('down', 'up')
UNTIL_FIRST_FAILURE = 'first_failure'
DEFAULT_MAX_SERVERS = 100000
#: steps one host's driver upgrade takes when ``upgrade_steps`` is not given
DEFAULT_UPGRADE_STEPS = 3


@dataclasses.dataclass
class Boot:
    flavor: str
    count: int = 1
    name: str | None = None       # server name prefix; the flavor's if None
    index: int = 0                # position in ``boots:``
    lifetime: int | None = None   # steps until the server is deleted
    #: Nova server metadata (``gpu_nova_ext:remediation: never``)
    metadata: dict[str, str] = dataclasses.field(default_factory=dict)
    project: str | None = None    # the RequestSpec's project (reservations)
    #: asked for this host, as ``openstack server create --host``
    host: str | None = None
    #: held on these GPUs of ``host`` (a snapshot's replay of a server)
    gpus: list[str] | None = None


@dataclasses.dataclass
class Event:
    host: str
    gpu: str | None = None
    health: str | None = None
    reasons: list[str] = dataclasses.field(default_factory=list)
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    index: int = 0
    agent: str | None = None      # down | up
    xids: list[int] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Delete:
    target: str                   # a server name or name prefix
    index: int = 0


@dataclasses.dataclass(kw_only=True, slots=True)
class Rollout:
    """A ``rollout:`` step: what ``openstack gpu rollout run`` is given."""

    driver: str                   # the target driver version (or branch)
    max_unavailable: float        # percent of each GPU pool out at once
    #: host-name prefixes (None: every GPU host)
    hosts: list[str] | None = None
    model: str | None = None      # only hosts with GPUs of this model
    upgrade_steps: int = DEFAULT_UPGRADE_STEPS
    index: int = 0


Step = Boot | Event | Delete | Rollout


@dataclasses.dataclass
class Workload:
    flavors: dict[str, float]     # name -> weight
    seed: int = 0
    lifetime: tuple[int, int] | None = None
    until: str = UNTIL_FIRST_FAILURE
    arrived_pct: float | None = None
    max_servers: int = DEFAULT_MAX_SERVERS


def parse_step(src: schema.Source, item: dict, index: int,
               scenario: Any) -> Step:
    """One ``boots:`` entry (checked by the scenario schema) as a Step."""
    entry = 'boots[%d]' % index
    if 'event' in item:
        return _event(src, item['event'], entry + '.event', index, scenario)
    if 'delete' in item:
        return Delete(target=item['delete'], index=index)
    if 'rollout' in item:
        return _rollout(src, item['rollout'], entry + '.rollout', index,
                        scenario)
    host = item.get('host')
    gpus = None
    if host is not None:
        known = _known_host(src, scenario, host, entry + '.host')
        if 'gpus' in item:
            gpus = [_known_gpu(src, known, host, address,
                               '%s.gpus[%d]' % (entry, i))
                    for i, address in enumerate(item['gpus'])]
    return Boot(flavor=_flavor_name(src, item['flavor'], entry + '.flavor',
                                    scenario),
                count=item.get('count', 1), name=item.get('name'),
                index=index, lifetime=item.get('lifetime'),
                metadata=remediation_spec.parse_metadata(
                    item.get('metadata') or {}),
                project=item.get('project'), host=host, gpus=gpus)


def _known_host(src: schema.Source, scenario: Any, name: str, entry: str):
    """The scenario's host ``name``; else a ScenarioError naming hosts."""
    host = scenario.host(name)
    if host is None:
        shown = [h.name for h in scenario.hosts[:10]]
        raise src.fail(entry, 'unknown host %r (hosts: %s%s)'
                       % (name, ', '.join(shown),
                          ', ...' if len(scenario.hosts) > 10 else ''))
    return host


# Not in the schema: whether a flavor, a host or a GPU exists depends on
# other entries of the scenario.
def _flavor_name(src: schema.Source, flavor: str, entry: str,
                 scenario: Any) -> str:
    if flavor not in scenario.flavors:
        raise src.fail(entry, 'unknown flavor %r. Define it under '
                       'flavors: (defined: %s).'
                       % (flavor, ', '.join(scenario.flavors)))
    return flavor


def _known_gpu(src: schema.Source, host: Any, host_name: str,
               address: str, entry: str) -> str:
    """The host's GPU at ``address``; else a ScenarioError naming them."""
    gpu = naming.normalize_pci_address(address)
    func = host.function(gpu)
    if func is None or not func.is_gpu and gpu not in host.gpus:
        raise src.fail(entry, 'host %s has no GPU %s (GPUs: %s)'
                       % (host_name, gpu, ', '.join(
                           f.address for f in host.pci_functions
                           if f.is_gpu)))
    return gpu


def _event(src: schema.Source, item: dict, entry: str, index: int,
           scenario: Any) -> Event:
    host_name = item['host']
    host = _known_host(src, scenario, host_name, entry + '.host')
    event = Event(host=host_name, index=index)
    if 'agent' in item:
        event.agent = item['agent']
        return event
    event.gpu = _known_gpu(src, host, host_name, item['gpu'],
                           entry + '.gpu')
    event.health = item.get('health')
    reasons = item.get('reasons') or []
    event.reasons = (_split(reasons) if isinstance(reasons, str)
                     else list(reasons))
    event.metrics = {str(k): float(v)
                     for k, v in (item.get('metrics') or {}).items()}
    xids = item.get('xids') or []
    event.xids = list(xids) if isinstance(xids, list) else [xids]
    return event


def _rollout(src: schema.Source, item: dict, entry: str, index: int,
             scenario: Any) -> Rollout:
    prefixes = item.get('hosts')
    if isinstance(prefixes, str):
        prefixes = _split(prefixes)
    # Not in the schema: which hosts exist depends on hosts:.
    for i, prefix in enumerate(prefixes or []):
        if not any(h.name.startswith(prefix) for h in scenario.hosts):
            shown = [h.name for h in scenario.hosts[:10]]
            raise src.fail('%s.hosts[%d]' % (entry, i),
                           'no host name starts with %r (hosts: %s%s); '
                           'give host-name prefixes' % (
                               prefix, ', '.join(shown),
                               ', ...' if len(scenario.hosts) > 10
                               else ''))
    return Rollout(driver=str(item['driver']),
                   max_unavailable=float(item['max_unavailable']),
                   hosts=list(prefixes) if prefixes else None,
                   model=item.get('model'),
                   upgrade_steps=item.get('upgrade_steps',
                                          DEFAULT_UPGRADE_STEPS),
                   index=index)


def _split(text: str) -> list[str]:
    """A comma-separated string list (``reasons: a, b``) as a list."""
    return [v.strip() for v in text.split(',') if v.strip()]


def parse_workload(src: schema.Source, item: dict,
                   scenario: Any) -> Workload:
    """``workload:`` (checked by the scenario schema) as a Workload."""
    entry = 'workload'
    flavors = {
        _flavor_name(src, name, schema.entry_path([entry, 'flavors', name]),
                     scenario): float(weight)
        for name, weight in item['flavors'].items()}
    work = Workload(flavors=flavors, seed=item.get('seed', 0),
                    max_servers=item.get('max_servers',
                                         DEFAULT_MAX_SERVERS))
    lifetime = item.get('lifetime')
    if isinstance(lifetime, dict):
        # Not in the schema: JSON Schema cannot compare two values.
        if lifetime['max'] < lifetime['min']:
            raise src.fail(entry + '.lifetime.max', 'must be at least '
                           'min (%d), got %d'
                           % (lifetime['min'], lifetime['max']))
        work.lifetime = (lifetime['min'], lifetime['max'])
    elif lifetime is not None:
        work.lifetime = (lifetime, lifetime)
    until = item.get('until', UNTIL_FIRST_FAILURE)
    if isinstance(until, dict):
        work.until = 'arrived_pct'
        work.arrived_pct = float(until['arrived_pct'])
    return work
