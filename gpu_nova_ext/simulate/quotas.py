# SPDX-License-Identifier: Apache-2.0

"""The scenario key ``quotas:``: GPU quota per model, enforced by Nova.

Design doc: Simulator.  What ``openstack gpu quota set`` does, before the
first boot, so an operator sees the effect of a limit before setting it::

    quotas:
      - {project: team-a, model: A100, limit: 4}   # a project limit
      - {model: L4, limit: 8}                      # every project's default
    boots:
      - {flavor: pt.a100, count: 5, project: team-a}   # the 5th is refused

``model`` is resolved against the resource classes of the embedded
Placement once the hosts are up, by the command's own rule
(:func:`gpu_nova_ext.operator.quota.resolve_model`: a model, a prefix or
a class name; every class it matches gets the limit); ``kind``
(``passthrough``, ``vgpu``, ``vgpu-vfio``) narrows it.

Each boot then passes Nova's own unified-limits check before it is
scheduled, as nova-api does (``nova.limit.placement.
enforce_num_instances_and_resources``: the deltas from the RequestSpec,
oslo.limit's Enforcer, Nova's rule for what to enforce, Nova's
TooManyInstances message).  Two things stand in for services the
simulator has not got, here and nowhere else:

* Keystone's limits: oslo.limit's own ``LimitFixture`` (the library's
  supported way to give its Enforcer limits without Keystone).  Every
  resource class and ``servers`` get an unlimited registered limit unless
  the scenario sets one, so only the scenario's limits bite.  A limit of
  0 is refused: Nova tells an explicit 0 from a missing limit by asking
  Keystone (``nova.limit.utils.should_enforce``), which is not there.
* Nova's usage callback (``nova.limit.placement._get_usage``): resource
  classes from Placement's usages through Nova's report client, as Nova
  counts them; ``servers`` from the simulator's live servers of the
  project (Nova counts instance mappings in its API database).

A refused boot is listed with Nova's message; it is demand the scheduler
never saw, so it is not a GPU failure (``until: first_failure`` goes on).
"""
import dataclasses
from typing import Callable

from gpu_nova_ext import exception
from gpu_nova_ext.operator import quota as op_quota
from gpu_nova_ext.simulate import schema

#: ``quotas: [{kind: ...}]`` (the scenario schema reads it)
KINDS = (op_quota.PASSTHROUGH, op_quota.VGPU, op_quota.VGPU_VFIO)
SERVERS = 'servers'
#: any id: the fixture answers every endpoint lookup
ENDPOINT_ID = 'gpu-nova-ext-simulate'


@dataclasses.dataclass
class Quota:
    project: str | None           # None: the cloud-wide default
    model: str
    kind: str | None
    limit: int                    # -1: unlimited
    entry: str = ''
    #: the resource names (``class:<RC>``) it resolved to
    resources: list[str] = dataclasses.field(default_factory=list)


def parse(src: schema.Source, value: list | None) -> list[Quota]:
    """The ``quotas:`` list (models are resolved at set-up).

    The scenario schema has checked each entry; a repeated entry is
    found here (JSON Schema's ``uniqueItems`` compares whole entries,
    not the project, model and kind of a limit).
    """
    out = []
    seen: dict[tuple, str] = {}
    for i, item in enumerate(value or []):
        entry = 'quotas[%d]' % i
        project, model = item.get('project'), item['model']
        kind = item.get('kind')
        key = (project, model.upper(), kind)
        if key in seen:
            raise src.fail(entry, 'the same project, model and kind as '
                           '%s' % seen[key])
        seen[key] = entry
        out.append(Quota(project=project, model=model, kind=kind,
                         limit=item['limit'], entry=entry))
    return out


class Quotas:
    """Nova's unified-limits check for one simulation run."""

    def __init__(self, scenario, novaconf, client, ctx,
                 servers_of: Callable[[str], int]):
        self.scenario = scenario
        self.client = client
        self.ctx = ctx
        self.servers_of = servers_of
        self.quotas: list[Quota] = scenario.quotas
        self._fixture = None
        from nova.limit import utils as limit_utils
        novaconf.set('driver', limit_utils.UNIFIED_LIMITS_DRIVER, 'quota')
        novaconf.set('endpoint_id', ENDPOINT_ID, 'oslo_limit')
        #: project -> resource name -> boots refused for it
        self.refused: dict[str, dict[str, int]] = {}

    def start(self) -> None:
        """Resolve the models in Placement; give oslo.limit the limits."""
        resp = self.client.get('/resource_classes', version='1.2')
        names = [rc['name'] for rc in resp.json()['resource_classes']]
        classes = op_quota.gpu_classes(names)
        registered = {'class:' + name: op_quota.UNLIMITED for name in names}
        registered[SERVERS] = op_quota.UNLIMITED
        projects: dict[str, dict[str, int]] = {}
        for q in self.quotas:
            try:
                found = op_quota.resolve_model(q.model, classes, q.kind)
            except exception.InvalidArgument:
                raise self.scenario.error(q.entry + '.model', (
                    'no GPU resource class of the scenario\'s hosts matches '
                    '%r%s (known: %s); give one of those, or give the hosts '
                    'per-model classes as gpu-nova-ext nova-conf writes them '
                    '(pci_resource_class: CUSTOM_GPU_<MODEL>, '
                    'vgpu_resource_class: CUSTOM_VGPU_<MODEL>)' % (
                        q.model, ' (%s)' % q.kind if q.kind else '',
                        ', '.join(c.label for c in classes) or 'none')))
            q.resources = [c.resource_name for c in found]
            for name in q.resources:
                if q.project is None:
                    registered[name] = q.limit
                else:
                    projects.setdefault(q.project, {})[name] = q.limit
        from oslo_limit import fixture as limit_fixture
        self._fixture = limit_fixture.LimitFixture(registered, projects)
        self._fixture.setUp()

    def stop(self) -> None:
        if self._fixture is not None:
            self._fixture.cleanUp()
            self._fixture = None

    def _usage(self, project_id: str, resource_names) -> dict[str, int]:
        """``nova.limit.placement._get_usage``, for the simulator."""
        usages = self.client.get_usages_counts_for_limits(self.ctx,
                                                          project_id)
        counts = {}
        for name in resource_names:
            if name == SERVERS:
                counts[name] = self.servers_of(project_id)
            else:
                counts[name] = usages.get(name[len('class:'):], 0)
        return counts

    def check(self, spec) -> str | None:
        """None when Nova lets ``spec``'s boot through, else its message."""
        from nova import exception as nova_exc
        from nova.limit import placement as nova_limits
        from oslo_limit import limit
        try:
            nova_limits.enforce_num_instances_and_resources(
                self.ctx, spec.project_id, spec, 1, 1,
                enforcer=limit.Enforcer(self._usage))
        except nova_exc.TooManyInstances as exc:
            refused = self.refused.setdefault(spec.project_id, {})
            for q in self.quotas:
                for name in q.resources:
                    if name in str(exc):
                        refused[name] = refused.get(name, 0) + 1
            return 'Quota exceeded: %s' % exc.format_message()
        return None

    def summary(self) -> list[dict]:
        """Per limit: the limit, the usage at the end, the boots refused.

        A default's refusals are those of the projects without a limit of
        their own on that class.
        """
        own = {(q.project, name) for q in self.quotas if q.project
               for name in q.resources}
        out = []
        for q in self.quotas:
            for name in q.resources:
                if q.project is not None:
                    used = self._usage(q.project, [name])[name]
                    refused = self.refused.get(q.project, {}).get(name, 0)
                else:
                    used = None
                    refused = sum(r.get(name, 0) for p, r in
                                  self.refused.items() if (p, name) not in own)
                out.append({
                    'project': q.project or '(default)', 'model': q.model,
                    'resource': name, 'limit': q.limit, 'used': used,
                    'refused': refused})
        return out


def table(rows: list[dict]) -> list[str]:
    """Lines for the table output (nothing without quotas)."""
    if not rows:
        return []
    lines = ['', 'QUOTAS (Nova unified limits; oslo.limit fed by the '
             'scenario)']
    for r in rows:
        lines.append('  %s %s: limit %s, used %s, boots refused %d' % (
            r['project'], r['resource'],
            'unlimited' if r['limit'] < 0 else r['limit'],
            '-' if r['used'] is None else r['used'], r['refused']))
    return lines
