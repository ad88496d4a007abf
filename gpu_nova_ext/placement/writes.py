# SPDX-License-Identifier: Apache-2.0

"""The write half of the agent's Placement reporter.

:class:`ProviderWrites` is mixed into
:class:`~gpu_nova_ext.placement.reporter.Reporter`: creating our own
providers, their traits and inventories, deleting providers whose GPU is
gone.  Every write is generation-checked (``write_generation_checked``: a
409 re-reads the provider and rebuilds the body from what is there now,
keeping every trait another writer set) and recorded in the cycle's
``ReportResult`` as a change, or moved to ``not_applied`` with the reason.
A cycle's reads and writes share one cache of provider state
(:class:`ProviderState` by UUID), valid while the generation does not move.
"""
import dataclasses

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import translation

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class ProviderState:
    """A provider as last read or written."""

    generation: int
    traits: frozenset[str] | None = None
    inventories: dict[str, dict] | None = None


class ProviderWrites:
    """Writes of :class:`~gpu_nova_ext.placement.reporter.Reporter`.

    Uses the reporter's ``client``, ``_states`` (UUID ->
    :class:`ProviderState`), ``_known_traits``, ``_known_classes``,
    ``_invalid`` (a bad answer), ``_not_applied`` (a change moved out of
    the result) and ``_read_inventories``.
    """

    def _ensure_traits(self, traits) -> None:
        missing = sorted({t for t in traits if t.startswith('CUSTOM_')} -
                         self._known_traits)
        if not missing:
            return
        path = '/traits?name=in:%s' % ','.join(missing)
        body = self.client.get(path, version=pclient.TRAITS_VERSION)
        try:
            present = set(body['traits'])
        except (KeyError, TypeError) as exc:
            raise self._invalid('GET', path, body, exc)
        for trait in missing:
            if trait not in present:
                self.client.put('/traits/%s' % trait,
                                version=pclient.TRAITS_VERSION)
            self._known_traits.add(trait)

    def _ensure_classes(self, classes) -> None:
        for rc in sorted(set(classes) - self._known_classes):
            self.client.put('/resource_classes/%s' % rc,
                            version=pclient.RESOURCE_CLASS_VERSION)
            self._known_classes.add(rc)

    def _apply(self, d: translation.DesiredProvider, p, root_uuid, result,
               dry_run):
        if d.uuid is None:
            self._create(d, root_uuid, result, dry_run)
            if dry_run:
                return
            p = translation.ExistingProvider(
                uuid=d.uuid, name=d.name, parent_uuid=root_uuid,
                generation=0, traits=frozenset(), inventories={})
            self._states[d.uuid] = ProviderState(0, frozenset(), {})
        if p is None:
            return
        self._write_traits(d, p, result, dry_run)
        if d.inventories is not None:
            self._write_inventories(d, p, result, dry_run)

    def _create(self, d, root_uuid, result, dry_run):
        result.changes.append('create provider %s (%s)' % (
            d.name, _describe_inventory(d.inventories)))
        if dry_run:
            return
        body = self.client.post(
            '/resource_providers',
            {'name': d.name, 'parent_provider_uuid': root_uuid},
            version=pclient.PROVIDERS_VERSION)
        try:
            d.uuid = as_str(body['uuid'])
        except (KeyError, TypeError) as exc:
            raise self._invalid('POST', '/resource_providers', body, exc)

    def _write_traits(self, d, p, result, dry_run):
        state = self._states[p.uuid]
        new = translation.merge_traits(state.traits, d.traits, d.owned)
        if new == state.traits:
            return
        added = sorted(new - state.traits)
        removed = sorted(state.traits - new)
        result.changes.append('%s: traits %s' % (d.name, ' '.join(
            ['+' + t for t in added] + ['-' + t for t in removed])))
        if dry_run:
            return
        path = '/resource_providers/%s/traits' % p.uuid
        first = [True]

        def build():
            if not first[0]:
                self._refresh(p.uuid, path)
            first[0] = False
            cur = self._states[p.uuid]
            want = translation.merge_traits(cur.traits, d.traits, d.owned)
            if want == cur.traits:
                return None
            return {'traits': sorted(want),
                    'resource_provider_generation': cur.generation}

        body = self.client.write_generation_checked(
            'PUT', path, build, version=pclient.TRAITS_VERSION)
        if body is not None:
            state = self._states[p.uuid]
            try:
                state.traits = frozenset(body['traits'])
                state.generation = as_int(body['resource_provider_generation'])
            except (KeyError, TypeError, ValueError) as exc:
                self._states.pop(p.uuid, None)
                raise self._invalid('PUT', path, body, exc)
        for trait in removed:
            if naming.host_reported_at(trait) is not None:
                self._forget_trait(trait)

    def _forget_trait(self, trait: str) -> None:
        """Delete a replaced reported stamp from Placement's trait list.

        Each stamp names a minute: without this the trait list would grow
        by one trait per host and hour.  Best effort: Placement refuses
        (409) while another provider still carries it.
        """
        self._known_traits.discard(trait)
        try:
            self.client.delete('/traits/%s' % trait,
                               version=pclient.TRAITS_VERSION)
        except exception.PlacementAPIError as exc:
            if pclient.error_status(exc) not in (404, 409):
                LOG.debug('Trait %(trait)s not deleted: %(err)s',
                          {'trait': trait, 'err': exc})
        except exception.PlacementUnavailable as exc:
            # the traits are written; a stamp left in the list is harmless
            LOG.debug('Trait %(trait)s not deleted: %(err)s',
                      {'trait': trait, 'err': exc})

    def _refresh(self, uuid, path):
        body = self.client.get(path, version=pclient.TRAITS_VERSION)
        try:
            traits = frozenset(as_str(t) for t in body['traits'])
            generation = as_int(body['resource_provider_generation'])
        except (KeyError, TypeError, ValueError) as exc:
            raise self._invalid('GET', path, body, exc)
        state = self._states.setdefault(uuid, ProviderState(generation))
        state.generation, state.traits = generation, traits
        if state.inventories is not None:
            state.inventories = self._read_inventories(uuid)

    def _write_inventories(self, d, p, result, dry_run):
        state = self._states[p.uuid]
        if not translation.inventory_differs(state.inventories,
                                             d.inventories):
            return
        result.changes.append('%s: inventory %s -> %s' % (
            d.name, _describe_inventory(state.inventories) or 'none',
            _describe_inventory(d.inventories)))
        if dry_run:
            return
        self._ensure_classes(d.inventories)
        path = '/resource_providers/%s/inventories' % p.uuid
        first = [True]

        def build():
            if not first[0]:
                self._refresh(p.uuid, '/resource_providers/%s/traits'
                              % p.uuid)
            first[0] = False
            cur = self._states[p.uuid]
            if not translation.inventory_differs(cur.inventories,
                                                 d.inventories):
                return None
            return {'inventories': d.inventories,
                    'resource_provider_generation': cur.generation}

        try:
            body = self.client.write_generation_checked(
                'PUT', path, build, version=pclient.INVENTORY_VERSION)
        except exception.PlacementAPIError as exc:
            if pclient.error_code(exc) == pclient.INVENTORY_INUSE:
                self._states.pop(p.uuid, None)
                result.warnings.append(
                    '%s: inventory in use, not changed: %s' % (d.name, exc))
                LOG.warning('%(name)s: inventory in use, not changed this '
                            'cycle: %(err)s', {'name': d.name, 'err': exc})
                return
            raise
        if body is not None:
            try:
                state.inventories = body['inventories']
                state.generation = as_int(body['resource_provider_generation'])
            except (KeyError, TypeError, ValueError) as exc:
                self._states.pop(p.uuid, None)
                raise self._invalid('PUT', path, body, exc)

    def _delete(self, p, result, dry_run):
        before = len(result.changes)
        result.changes.append('delete provider %s (its GPU is gone, no '
                              'allocations)' % p.name)
        if dry_run:
            return
        try:
            self.client.delete('/resource_providers/%s' % p.uuid,
                               version=pclient.PROVIDERS_VERSION)
        except exception.PlacementAPIError as exc:
            if pclient.error_status(exc) == 404:
                pass
            elif pclient.error_code(exc) == pclient.PROVIDER_IN_USE:
                self._not_applied(result, p.name, before,
                                  'it got allocations meanwhile; it will be '
                                  'reserved next cycle')
            else:
                self._not_applied(result, p.name, before, exc)
        self._states.pop(p.uuid, None)


def _describe_inventory(inventories) -> str:
    return ', '.join(
        '%s total %s reserved %s' % (rc, inv.get('total'), inv.get('reserved'))
        for rc, inv in sorted((inventories or {}).items()))


def as_str(value) -> str:
    if not isinstance(value, str):
        raise TypeError('expected a string, got %r' % (value,))
    return value


def as_int(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError('expected an integer, got %r' % (value,))
    return value
