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

"""The steps of a scenario: boots, events, deletes, and the workload.

``boots:`` lists what happens in order, one step after another (each
step takes ``step_seconds`` of simulated time):

* a boot ``{flavor, count, name, lifetime, metadata}``: ``count`` servers,
  deleted again ``lifetime`` steps after they were booted when given,
  with Nova server ``metadata`` (remediation's opt-out);
* an event ``{event: {host, gpu, health, reasons, metrics, xids}}``
  changes what the GPU reports: ``health`` as given, ``metrics`` and
  ``xids`` (NVIDIA XID events) through the agent's health judge
  (:mod:`gpu_nova_ext.simulate.agent_health`);
  ``{event: {host, agent: down|up}}`` stops or restarts the host's agent
  (its state then ages out after ``state_ttl``);
* a delete ``{delete: NAME_OR_PREFIX}`` deletes the server of that name,
  or every server whose name starts with it.

``workload:`` then generates boots until its stop condition: flavors drawn
by weight from a seeded random generator, each with an optional lifetime
drawn between ``min`` and ``max`` steps.
"""
import dataclasses
from typing import Any

from gpu_nova_ext.inventory import simulated
from gpu_nova_ext.simulate import checks
from gpu_nova_ext.simulate import remediation_spec

BOOT_KEYS = ('flavor', 'count', 'name', 'lifetime', 'metadata', 'project')
EVENT_KEYS = ('host', 'gpu', 'health', 'reasons', 'metrics', 'xids',
              'agent')
WORKLOAD_KEYS = ('flavors', 'seed', 'lifetime', 'until', 'max_servers')
AGENT_STATES = ('down', 'up')
UNTIL_FIRST_FAILURE = 'first_failure'
MAX_COUNT = 100000
MAX_LIFETIME = 10 ** 7
DEFAULT_MAX_SERVERS = 100000
#: NVIDIA XID codes are small positive integers
MAX_XID = 100000


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


Step = Boot | Event | Delete


@dataclasses.dataclass
class Workload:
    flavors: dict[str, float]     # name -> weight
    seed: int = 0
    lifetime: tuple[int, int] | None = None
    until: str = UNTIL_FIRST_FAILURE
    arrived_pct: float | None = None
    max_servers: int = DEFAULT_MAX_SERVERS


def parse_step(check: checks.Checker, item: Any, index: int,
               scenario: Any) -> Step:
    entry = 'boots[%d]' % index
    item = check.mapping(item, entry)
    for special in ('event', 'delete'):
        if special in item and len(item) != 1:
            raise check.fail(entry, 'an entry with "%s:" holds nothing else; '
                             'put boots in their own entries' % special)
    if 'event' in item:
        return _event(check, item['event'], entry + '.event', index,
                      scenario)
    if 'delete' in item:
        return Delete(target=check.name(item['delete'], entry + '.delete'),
                      index=index)
    check.keys(item, BOOT_KEYS, entry)
    flavor = _flavor_name(check, check.required(item, 'flavor', entry),
                          entry + '.flavor', scenario)
    name = item.get('name')
    if name is not None:
        name = check.name(name, entry + '.name', room=7)
    lifetime = None
    if 'lifetime' in item:
        lifetime = check.integer(item['lifetime'], entry + '.lifetime', 1,
                                 MAX_LIFETIME)
    metadata = {}
    if 'metadata' in item:
        metadata = remediation_spec.parse_metadata(
            check, item['metadata'], entry + '.metadata')
    return Boot(flavor=flavor,
                count=check.integer(item.get('count', 1), entry + '.count',
                                    1, MAX_COUNT),
                name=name, index=index, lifetime=lifetime,
                metadata=metadata,
                project=check.string(item['project'], entry + '.project')
                if 'project' in item else None)


def _flavor_name(check, value, entry, scenario) -> str:
    flavor = check.string(value, entry)
    if flavor not in scenario.flavors:
        raise check.fail(entry, 'unknown flavor %r. Define it under '
                         'flavors: (defined: %s).'
                         % (flavor, ', '.join(scenario.flavors)))
    return flavor


def _event(check: checks.Checker, item: Any, entry: str, index: int,
           scenario: Any) -> Event:
    item = check.mapping(item, entry)
    check.keys(item, EVENT_KEYS, entry)
    host_name = check.string(check.required(item, 'host', entry),
                             entry + '.host')
    host = scenario.host(host_name)
    if host is None:
        shown = [h.name for h in scenario.hosts[:10]]
        raise check.fail(entry + '.host', 'unknown host %r (hosts: %s%s)'
                         % (host_name, ', '.join(shown),
                            ', ...' if len(scenario.hosts) > 10 else ''))
    event = Event(host=host_name, index=index)
    if 'agent' in item:
        if len(item) != 2:
            raise check.fail(entry, 'an agent event holds only "host" and '
                             '"agent"; change GPUs in another event')
        event.agent = check.choice(item['agent'], AGENT_STATES,
                                   entry + '.agent')
        return event
    gpu = check.pci_address(check.required(item, 'gpu', entry),
                            entry + '.gpu')
    func = host.function(gpu)
    if func is None or not func.is_gpu and gpu not in host.gpus:
        raise check.fail(entry + '.gpu', 'host %s has no GPU %s (GPUs: %s)'
                         % (host_name, gpu, ', '.join(
                             f.address for f in host.pci_functions
                             if f.is_gpu)))
    if not {'health', 'metrics', 'xids'} & set(item):
        raise check.fail(entry, 'an event changes "health", "metrics" '
                         'and/or "xids" of a GPU, or "agent" of a host; give '
                         'at least one')
    event.gpu = gpu
    if 'health' in item:
        event.health = check.choice(item['health'], simulated.HEALTH_STATES,
                                    entry + '.health')
    event.reasons = check.str_list(item.get('reasons') or [],
                                   entry + '.reasons')
    metrics = check.mapping(item.get('metrics') or {}, entry + '.metrics')
    event.metrics = {str(k): check.number(v, '%s.metrics.%s' % (entry, k),
                                          minimum=-273.0)
                     for k, v in metrics.items()}
    xids = item.get('xids') or []
    if not isinstance(xids, list):
        xids = [xids]
    event.xids = [check.integer(x, '%s.xids[%d]' % (entry, i), 1, MAX_XID)
                  for i, x in enumerate(xids)]
    return event


def parse_workload(check: checks.Checker, item: Any,
                   scenario: Any) -> Workload:
    entry = 'workload'
    item = check.mapping(item, entry)
    check.keys(item, WORKLOAD_KEYS, entry)
    mix = check.mapping(check.required(item, 'flavors', entry),
                        entry + '.flavors')
    if not mix:
        raise check.fail(entry + '.flavors', 'give at least one flavor '
                         'with its weight')
    flavors = {}
    for name, weight in mix.items():
        fentry = '%s.flavors.%s' % (entry, name)
        flavors[_flavor_name(check, name, fentry, scenario)] = check.number(
            weight, fentry, minimum=0.0, maximum=1e6,
            exclusive_minimum=True)
    work = Workload(flavors=flavors)
    if 'seed' in item:
        work.seed = check.integer(item['seed'], entry + '.seed', 0,
                                  2 ** 63)
    if 'lifetime' in item:
        value = item['lifetime']
        if isinstance(value, dict):
            check.keys(value, ('min', 'max'), entry + '.lifetime')
            low = check.integer(check.required(value, 'min',
                                               entry + '.lifetime'),
                                entry + '.lifetime.min', 1, MAX_LIFETIME)
            high = check.integer(check.required(value, 'max',
                                                entry + '.lifetime'),
                                 entry + '.lifetime.max', low, MAX_LIFETIME)
        else:
            low = high = check.integer(value, entry + '.lifetime', 1,
                                       MAX_LIFETIME)
        work.lifetime = (low, high)
    until = item.get('until', UNTIL_FIRST_FAILURE)
    if isinstance(until, dict):
        check.keys(until, ('arrived_pct',), entry + '.until')
        work.until = 'arrived_pct'
        work.arrived_pct = check.number(
            check.required(until, 'arrived_pct', entry + '.until'),
            entry + '.until.arrived_pct', minimum=0.0, maximum=100000.0,
            exclusive_minimum=True)
    elif until != UNTIL_FIRST_FAILURE:
        raise check.fail(entry + '.until', '%r is not a stop condition: use '
                         '"first_failure" or {arrived_pct: N}' % (until,))
    if 'max_servers' in item:
        work.max_servers = check.integer(item['max_servers'],
                                         entry + '.max_servers', 1,
                                         10 ** 7)
    return work
