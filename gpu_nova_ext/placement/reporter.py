# SPDX-License-Identifier: Apache-2.0

"""Report this host's GPUs to Placement: read, translate, write the diff.

One :meth:`Reporter.report` call is the Placement part of an agent cycle:

1. find the compute node provider (by ``[DEFAULT] host``, the hypervisor
   hostname nova-compute uses) and read its tree;
2. read the traits (and, for our own providers, inventories) of the
   providers the translation needs, re-using what was read in an earlier
   cycle while the provider's generation has not moved;
3. :func:`~gpu_nova_ext.placement.translation.translate` to the desired
   state, then write only what differs, each write generation-checked
   (a 409 re-reads and retries, keeping the other writer's traits);
4. record on each :class:`~gpu_nova_ext.inventory.base.Gpu` the UUIDs of
   the providers it backs, the project its providers are reserved for
   (``Gpu.reserved_for``, from the ``CUSTOM_GPU_RESERVED_<project>`` trait
   ``openstack gpu reservation create`` writes: read with the traits, no
   extra request) and, for a ``passthrough`` GPU, whether they hold
   allocations (``Gpu.assigned``, one ``GET .../usages`` per provider).

A cycle where nothing changed makes no write request.  Its reads: the
tree, the traits (and our inventories) of providers whose generation
moved, and the usages of every provider standing for a passthrough GPU
(allocations do not always move a provider's generation: deleting them
does not, so usages are read every cycle).  A provider whose
answer is not what the Placement API documents is logged (request id and
body excerpt) and skipped for this cycle.
"""
import dataclasses
import datetime
import urllib.parse

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import translation
from gpu_nova_ext.placement import writes

LOG = logging.getLogger(__name__)
_str = writes.as_str
_int = writes.as_int


@dataclasses.dataclass
class ReportResult:
    #: human-readable changes ("would" changes with dry_run)
    changes: list[str] = dataclasses.field(default_factory=list)
    #: write requests sent to Placement in this cycle
    writes: int = 0
    root_provider_uuid: str | None = None
    nodename: str | None = None
    #: providers skipped this cycle, with the reason
    skipped: list[str] = dataclasses.field(default_factory=list)
    #: changes that Placement refused or that failed this cycle, each with
    #: the reason (not in ``changes``); the next cycle tries again
    not_applied: list[str] = dataclasses.field(default_factory=list)
    warnings: list[str] = dataclasses.field(default_factory=list)
    dry_run: bool = False


def parse_reserved_gpus(values) -> set[str]:
    """``[agent] reserved_gpus`` -> normalized addresses, or InvalidOption."""
    out = set()
    for value in values or ():
        try:
            out.add(naming.normalize_pci_address(value))
        except ValueError as exc:
            raise exception.InvalidOption(
                group='agent', option='reserved_gpus', value=value,
                reason=str(exc))
    return out


class Reporter(writes.ProviderWrites):
    """Writes the difference between a HostInventory and Placement.

    :param conf: the agent's ConfigOpts (``[DEFAULT] host``,
        ``[agent] mode`` and ``reserved_gpus`` are read here; a bad value
        raises :class:`~gpu_nova_ext.exception.InvalidOption`).
    :param client: a :class:`~gpu_nova_ext.placement.client.PlacementClient`.
    """

    def __init__(self, conf, client: pclient.PlacementClient):
        self.conf = conf
        self.client = client
        self.mode = conf.agent.mode
        if self.mode not in translation.MODES:
            raise exception.InvalidOption(
                group='agent', option='mode', value=self.mode,
                reason='expected one of %s' % ', '.join(translation.MODES))
        self.reserved_gpus = parse_reserved_gpus(conf.agent.reserved_gpus)
        self._root: translation.ExistingProvider | None = None
        self._states: dict[str, writes.ProviderState] = {}
        self._known_traits: set[str] = set()
        self._known_classes: set[str] = set()
        # provider UUID -> reserving projects, as last read
        self._reserved: dict[str, frozenset[str]] = {}
        #: log each change at INFO (the daemon); the CLI prints them itself
        self.log_changes = True
        #: the UTC time of a cycle (the root's reported stamp)
        self.now = lambda: datetime.datetime.now(datetime.timezone.utc)

    # -- the compute node provider -----------------------------------------

    @property
    def compute_node(self) -> translation.ExistingProvider | None:
        """The compute node provider found last (uuid, name), or None."""
        return self._root

    def find_compute_node(self, hostnames=()) -> tuple[str, str]:
        """(uuid, name) of this host's compute node provider.

        Tries ``[DEFAULT] host`` and the given names as provider names,
        then a single root provider named ``<host>.<domain>`` (libvirt
        reports the FQDN as hypervisor hostname).

        :raises ComputeNodeNotFound: nova-compute has not created it yet.
        """
        names = [self.conf.host] + [n for n in hostnames
                                    if n and n != self.conf.host]
        for name in names:
            found = self._providers('name=%s' % urllib.parse.quote(name))
            roots = [p for p in found if p.parent_uuid is None]
            if roots:
                self._root = roots[0]
                return roots[0].uuid, roots[0].name
        prefix = self.conf.host + '.'
        fqdn = [p for p in self._providers('')
                if p.parent_uuid is None and p.name.startswith(prefix)]
        if len(fqdn) == 1:
            self._root = fqdn[0]
            return fqdn[0].uuid, fqdn[0].name
        raise exception.ComputeNodeNotFound(host=self.conf.host)

    def _providers(self, query: str) -> list[translation.ExistingProvider]:
        path = '/resource_providers' + ('?' + query if query else '')
        body = self.client.get(path, version=pclient.PROVIDERS_VERSION)
        try:
            return [translation.ExistingProvider(
                uuid=_str(p['uuid']), name=_str(p['name']),
                parent_uuid=p.get('parent_provider_uuid'),
                generation=_int(p['generation']))
                for p in body['resource_providers']]
        except (KeyError, TypeError, ValueError) as exc:
            raise self._invalid('GET', path, body, exc)

    def _invalid(self, method, path, body, exc):
        return exception.PlacementInvalidResponse(
            method=method, url=path, request_id=self.client.last_request_id,
            detail='%s (%s)' % (pclient.excerpt(body), exc))

    # -- reading provider state --------------------------------------------

    def _read(self, p: translation.ExistingProvider, inventories: bool):
        cached = self._states.get(p.uuid)
        if cached is None or cached.generation != p.generation or (
                inventories and cached.inventories is None):
            cached = writes.ProviderState(p.generation)
            path = '/resource_providers/%s/traits' % p.uuid
            body = self.client.get(path, version=pclient.TRAITS_VERSION)
            try:
                cached.traits = frozenset(_str(t) for t in body['traits'])
                cached.generation = _int(
                    body['resource_provider_generation'])
            except (KeyError, TypeError, ValueError) as exc:
                raise self._invalid('GET', path, body, exc)
            if inventories:
                cached.inventories = self._read_inventories(p.uuid)
            self._states[p.uuid] = cached
        p.generation = cached.generation
        p.traits = cached.traits
        if inventories:
            p.inventories = cached.inventories

    def _read_inventories(self, uuid):
        path = '/resource_providers/%s/inventories' % uuid
        body = self.client.get(path, version=pclient.INVENTORY_VERSION)
        try:
            invs = body['inventories']
            for rc, inv in invs.items():
                _int(inv['total'])
                _int(inv['reserved'])
            return invs
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._invalid('GET', path, body, exc)

    def _read_used(self, p: translation.ExistingProvider) -> None:
        p.used = self._used(p.uuid)

    def _used(self, uuid: str) -> bool:
        path = '/resource_providers/%s/usages' % uuid
        body = self.client.get(path, version=pclient.INVENTORY_VERSION)
        try:
            return any(_int(v) > 0 for v in body['usages'].values())
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise self._invalid('GET', path, body, exc)

    def _record_assigned(self, inventory: base.HostInventory,
                         known: dict[str, bool | None]) -> None:
        """Set ``Gpu.assigned`` of each passthrough GPU from usages.

        True when one of its providers holds allocations, False when none
        does, None when it has no provider or a usage could not be read.
        The vGPU modes keep None: their providers (one pGPU provider per
        GPU or VF, or the PF's PCI provider holding the VF inventory) are
        shared by several instances, and their capacity is the
        ``vgpu_types`` available counts.  ``known`` holds usages already
        read this cycle (by provider UUID).
        """
        unreachable = False
        for gpu in inventory.gpus:
            gpu.assigned = None
            if gpu.mode != naming.MODE_PASSTHROUGH or not gpu.provider_uuids:
                continue
            assigned: bool | None = False
            for uuid in gpu.provider_uuids:
                used = known.get(uuid)
                if used is None and not unreachable:
                    try:
                        used = self._used(uuid)
                    except exception.PlacementUnavailable as exc:
                        LOG.warning('Cannot read the usages of %(uuid)s '
                                    '(GPU %(addr)s): %(err)s; passthrough '
                                    'GPUs are sent as unknown this cycle',
                                    {'uuid': uuid, 'addr': gpu.pci_address,
                                     'err': exc})
                        unreachable = True
                    except exception.PlacementAPIError as exc:
                        LOG.warning('Cannot read the usages of %(uuid)s '
                                    '(GPU %(addr)s): %(err)s',
                                    {'uuid': uuid, 'addr': gpu.pci_address,
                                     'err': exc})
                    known[uuid] = used
                if used:
                    assigned = True
                    break
                if used is None:
                    assigned = None
            gpu.assigned = assigned

    def _record_reserved(self, inventory: base.HostInventory,
                         result: ReportResult) -> None:
        """Set ``Gpu.reserved_for`` from its providers' traits.

        The traits are those read (or written) this cycle; a provider whose
        traits could not be read this cycle keeps what was read last (a
        failed read never lifts a reservation).  PCI-in-Placement providers
        are not read (Nova rewrites their traits, so they never hold a
        reservation).  Providers of one GPU reserved for different
        projects: the first project in sorted order, with a warning.
        """
        for gpu in inventory.gpus:
            projects: set[str] = set()
            for uuid in gpu.provider_uuids:
                state = self._states.get(uuid)
                if state is not None and state.traits is not None:
                    self._reserved[uuid] = frozenset(
                        p for p in map(naming.reservation_project,
                                       state.traits) if p is not None)
                projects.update(self._reserved.get(uuid, ()))
            gpu.reserved_for = min(projects) if projects else None
            if len(projects) > 1:
                warning = ('GPU %s: its providers are reserved for several '
                           'projects (%s); %s is sent to the schedulers. '
                           'Run openstack gpu reservation list and '
                           'delete all but one.' % (
                               gpu.pci_address, ', '.join(sorted(projects)),
                               gpu.reserved_for))
                LOG.warning('%s', warning)
                result.warnings.append(warning)

    def _skip(self, result, name, exc):
        if isinstance(exc, exception.PlacementInvalidResponse):
            LOG.error('Skipping provider %(name)s this cycle: %(err)s',
                      {'name': name, 'err': exc})
        else:
            LOG.warning('Skipping provider %(name)s this cycle: %(err)s',
                        {'name': name, 'err': exc})
        result.skipped.append('%s: %s' % (name, exc))

    def _not_applied(self, result, name, before, exc):
        """Move the changes from index ``before`` on to ``not_applied``.

        :param exc: why (an exception or a sentence).
        """
        changes = result.changes[before:] or ['%s: update' % name]
        del result.changes[before:]
        LOG.warning('Not applied this cycle: %(changes)s: %(err)s',
                    {'changes': '; '.join(changes), 'err': exc})
        result.not_applied.extend('%s (%s)' % (c, exc) for c in changes)

    # -- the cycle ---------------------------------------------------------

    def report(self, inventory: base.HostInventory,
               dry_run: bool = False) -> ReportResult:
        """Bring Placement in line with ``inventory``; see the module doc.

        :raises ComputeNodeNotFound: no compute node provider yet.
        :raises PlacementUnavailable: Placement could not be reached.
        """
        writes_before = self.client.writes
        result = ReportResult(dry_run=dry_run)
        existing = self._tree(inventory)
        root_uuid, nodename = self._root.uuid, self._root.name
        result.root_provider_uuid, result.nodename = root_uuid, nodename

        want_traits, want_inv = translation.providers_to_read(
            nodename, root_uuid, existing)
        skipped = set()
        for p in existing:
            if p.name not in want_traits:
                continue
            try:
                self._read(p, p.name in want_inv)
            except exception.PlacementAPIError as exc:
                self._skip(result, p.name, exc)
                skipped.add(p.name)
        desired = self._translate(inventory, nodename, root_uuid, existing,
                                  result, skipped)
        result.warnings.extend(desired.warnings)
        for warning in desired.warnings:
            LOG.warning('%s', warning)

        by_name = {p.name: p for p in existing}
        todo = [d for d in desired.providers if d.name not in skipped]
        if not dry_run:
            self._ensure_traits(t for d in todo for t in d.traits)
        for d in todo:
            before = len(result.changes)
            try:
                self._apply(d, by_name.get(d.name), root_uuid, result,
                            dry_run)
            except exception.PlacementAPIError as exc:
                # includes PlacementConflict: retried next cycle
                self._states.pop(d.uuid, None)
                self._not_applied(result, d.name, before, exc)
        for p in desired.delete:
            if p.name not in skipped:
                self._delete(p, result, dry_run)

        uuids = {p.name: p.uuid for p in existing}
        uuids.update({d.name: d.uuid for d in desired.providers if d.uuid})
        for gpu in inventory.gpus:
            gpu.provider_uuids = [
                uuids[n] for n in desired.gpu_providers.get(
                    gpu.pci_address, []) if n in uuids]
        self._record_reserved(inventory, result)
        self._record_assigned(inventory, {
            p.uuid: p.used for p in existing if p.used is not None})
        result.writes = self.client.writes - writes_before
        if self.log_changes:
            for change in result.changes:
                LOG.info('%s%s', 'would: ' if dry_run else '', change)
        return result

    def _tree(self, inventory):
        if self._root is None:
            self.find_compute_node([inventory.host])
        tree = self._providers('in_tree=%s' % self._root.uuid)
        if not any(p.uuid == self._root.uuid for p in tree):
            LOG.warning('Compute node provider %(name)s (%(uuid)s) is gone; '
                        'looking it up again',
                        {'name': self._root.name, 'uuid': self._root.uuid})
            self._root = None
            self._states.clear()
            self.find_compute_node([inventory.host])
            tree = self._providers('in_tree=%s' % self._root.uuid)
        return tree

    def _translate(self, inventory, nodename, root_uuid, existing, result,
                   skipped):
        # Skipped providers stay in ``existing`` (their traits unknown):
        # their GPU still has a provider, we just do not write it.
        now = self.now()

        def run():
            return translation.translate(
                inventory, nodename=nodename, root_uuid=root_uuid,
                existing=existing, mode=self.mode,
                reserved_gpus=self.reserved_gpus, now=now)

        desired = run()
        if desired.need_usage:
            for p in existing:
                if p.name in desired.need_usage and p.name not in skipped:
                    try:
                        self._read_used(p)
                    except exception.PlacementAPIError as exc:
                        self._skip(result, p.name, exc)
                        skipped.add(p.name)
            desired = run()
        return desired
