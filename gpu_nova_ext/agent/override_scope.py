# SPDX-License-Identifier: Apache-2.0

"""Per-host and per-aggregate values over per-model ones.

``[mig] layouts`` and ``[power] profiles`` give a value per GPU model
(``MODEL:VALUE``).  ``[mig] aggregate_layouts`` / ``host_layouts`` and
``[power] aggregate_profiles`` / ``host_profiles`` give one for the hosts
of a Placement aggregate or for one host: ``SCOPE:MODEL:VALUE``.  On a
host, a model's value is the host's own, else its aggregates', else the
model's: host > aggregate > model.  One configuration file can so serve
a whole cloud.

Aggregates are Placement's: the UUIDs of the aggregates of the host's
compute node (root) provider, which Nova keeps in step with its host
aggregates (a host added to a Nova aggregate joins the Placement
aggregate of the same UUID; ``nova-manage placement sync_aggregates``
mends gaps).  The agent reads them after each Placement report
(:func:`read_aggregates`); until it has, or when Placement fails, they are
unknown and :meth:`Chooser.choose` says so instead of guessing.
"""
import dataclasses

from oslo_log import log as logging
from oslo_utils import uuidutils

from gpu_nova_ext import exception

LOG = logging.getLogger(__name__)

#: Placement microversion of ``GET /resource_providers/{uuid}/aggregates``
#: with the provider generation (1.19)
AGGREGATES_VERSION = '1.19'
SOURCES = ('host', 'aggregate', 'model')


def split(value: str, group: str, option: str, scope: str) -> tuple:
    """``SCOPE:MODEL:VALUE`` -> ``(SCOPE, 'MODEL:VALUE')``.

    ``scope`` is ``host`` or ``aggregate``: an aggregate is its UUID.
    """
    parts = value.rsplit(':', 2)
    name = parts[0].strip() if len(parts) == 3 else ''
    if not name:
        raise exception.InvalidOption(
            group=group, option=option, value=value,
            reason='expected %s:MODEL:VALUE, for example %s' % (
                scope.upper(), ('node-07:A100_80GB_PCIE:...' if
                                scope == 'host' else
                                '8c1f...-uuid:A100_80GB_PCIE:...')))
    if scope == 'aggregate' and not uuidutils.is_uuid_like(name):
        raise exception.InvalidOption(
            group=group, option=option, value=value,
            reason='aggregate %r is not a UUID: the agent learns its '
                   'aggregates from Placement, which knows them by UUID '
                   '(openstack aggregate show %s -c uuid)' % (name, name))
    return (name.lower() if scope == 'aggregate' else name,
            parts[1] + ':' + parts[2])


@dataclasses.dataclass(frozen=True)
class Choice:
    """A model's value on this host and where it came from."""

    value: object = None
    #: 'host NAME', 'aggregate UUID', 'model', or None (no value)
    source: str | None = None
    #: why no value could be chosen (aggregates unknown, or two of the
    #: host's aggregates disagree); the caller changes nothing then
    problem: str | None = None


class Chooser:
    """host > aggregate > model, for one host.

    :param by_model: model -> value
    :param by_aggregate: aggregate UUID -> model -> value
    :param by_host: model -> value of this host
    :param wildcard: ``*`` stands for every model (power profiles): a
        scope's own model wins over its ``*``, any scope over a lower one.
    """

    def __init__(self, host: str, by_model: dict, by_aggregate: dict,
                 by_host: dict, wildcard: bool = False):
        self.host = host
        self.by_model = by_model
        self.by_aggregate = by_aggregate
        self.by_host = by_host
        self.keys = (lambda m: (m, '*')) if wildcard else (lambda m: (m,))

    def _get(self, table: dict, model: str):
        for key in self.keys(model or ''):
            if key in table:
                return table[key]
        return None

    def active(self) -> bool:
        return bool(self.by_model or self.by_aggregate or self.by_host)

    def candidates(self, model: str) -> list:
        """Every value the model may get here, whatever the aggregates."""
        found = [self._get(self.by_host, model),
                 *(self._get(t, model) for t in self.by_aggregate.values()),
                 self._get(self.by_model, model)]
        return [v for v in found if v is not None]

    def choose(self, model: str, aggregates) -> Choice:
        """The value of ``model``; ``aggregates``: UUIDs, None if unknown."""
        value = self._get(self.by_host, model)
        if value is not None:
            return Choice(value, 'host %s' % self.host)
        scoped = {uuid: self._get(table, model)
                  for uuid, table in self.by_aggregate.items()}
        scoped = {u: v for u, v in scoped.items() if v is not None}
        if scoped and aggregates is None:
            return Choice(problem='the host\'s Placement aggregates are not '
                                  'known yet (aggregate %s has a value for '
                                  '%s)' % (sorted(scoped)[0], model))
        mine = {u: v for u, v in scoped.items() if u in (aggregates or ())}
        if len(set(map(_key, mine.values()))) > 1:
            return Choice(problem='aggregates %s give %s different values; '
                                  'give the host its own (host_...)' % (
                                      ' and '.join(sorted(mine)), model))
        if mine:
            uuid = sorted(mine)[0]
            return Choice(mine[uuid], 'aggregate %s' % uuid)
        value = self._get(self.by_model, model)
        if value is not None:
            return Choice(value, 'model')
        return Choice()


def _key(value):
    describe = getattr(value, 'describe', None)
    return describe() if describe else getattr(value, 'name', value)


def read_aggregates(client, root_uuid: str | None):
    """The aggregate UUIDs of the compute node provider; None on failure."""
    if client is None or not root_uuid:
        return None
    try:
        body = client.get('/resource_providers/%s/aggregates' % root_uuid,
                          version=AGGREGATES_VERSION)
    except Exception as exc:  # noqa: any failure means unknown
        LOG.warning('The aggregates of provider %(rp)s could not be read '
                    'from Placement (%(err)s): per-aggregate MIG layouts '
                    'and power profiles wait', {'rp': root_uuid,
                                                'err': exc})
        return None
    return frozenset(a.lower() for a in (body or {}).get('aggregates', []))
