# SPDX-License-Identifier: Apache-2.0

"""GPU reservations: keep GPUs, or whole hosts, for one project.

Design doc: Reservations.  Two mechanisms, each what Nova or Placement
already offers where it fits:

* one GPU: the trait ``CUSTOM_GPU_RESERVED_<project>``
  (:func:`gpu_nova_ext.naming.reservation_trait`) on the GPU's providers
  in Placement: libvirt pGPU providers (Nova only adds traits there) and
  our own ``inventory``-mode providers.  Never on PCI-in-Placement
  providers: nova-compute rewrites their traits at its next update, so
  such a reservation would vanish; those GPUs are reserved with their
  whole host.  The agent reads the trait and sends the project in the
  GPU's state (``reserved_for``); GpuReservationFilter keeps other
  projects off, GpuReservationWeigher and GpuCandidateOrderFilter send
  the project there first.
* a whole host or an aggregate: a Nova host aggregate with metadata
  ``filter_tenant_id=<project>`` (``gpu-reserved-<project>`` for a host),
  which Nova's AggregateMultiTenancyIsolation filter enforces.

Every Placement write is generation-checked (a 409 re-reads and retries)
and keeps every other trait.  ``placement`` is a
:class:`gpu_nova_ext.placement.client.PlacementClient`, ``conn`` an
openstacksdk connection.
"""
import dataclasses
import re
import urllib.parse

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.placement import client as pclient

AGGREGATE_PREFIX = 'gpu-reserved-'
#: Nova's AggregateMultiTenancyIsolation reads every metadata key starting
#: with it (nova/scheduler/filters/aggregate_multitenancy_isolation.py)
TENANT_KEY = 'filter_tenant_id'
MECHANISM_TRAIT = 'trait'
MECHANISM_AGGREGATE = 'aggregate'
GPU_FILTER = 'GpuReservationFilter'
HOST_FILTER = 'AggregateMultiTenancyIsolation'
_PROJECT_RE = re.compile(r'^[A-Za-z0-9_-]{1,64}$')

KIND_PGPU = 'pgpu'
KIND_OWN = 'own'
KIND_PCI = 'pci'


@dataclasses.dataclass
class Reservation:
    """One reserved GPU or host, as ``gpu reservation list`` shows it."""

    project: str
    host: str
    gpu: str | None                # PCI address; None: the whole host
    model: str | None
    mechanism: str                 # trait | aggregate <name>
    providers: list[str] = dataclasses.field(default_factory=list)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class GpuProvider:
    uuid: str
    name: str
    kind: str
    address: str


# -- input -------------------------------------------------------------------

def check_project_format(project: str) -> str:
    """The reservation trait of ``project``, or InvalidArgument."""
    if not _PROJECT_RE.match(project or ''):
        raise exception.InvalidArgument(
            argument='--project', value=repr(project),
            reason='a project id is 1 to 64 letters, digits, - or _ '
                   '(openstack project list shows them)')
    return naming.reservation_trait(project)


def check_project(conn, project: str) -> str | None:
    """Look ``project`` up in Keystone; a note when it cannot be.

    :raises ReservationError: Keystone says there is no such project.
    :returns: None when Keystone knows it, else a sentence saying the
        project could not be checked (no identity endpoint: only its
        format was checked).
    """
    check_project_format(project)
    from keystoneauth1 import exceptions as ks_exc
    from openstack import exceptions as os_exc
    try:
        conn.identity.get_project(project)
    except os_exc.NotFoundException:
        raise exception.ReservationError(
            what='Project %s' % project, reason='Keystone has no such '
            'project', fix='Give a project id from openstack project list.')
    except AttributeError:
        # no identity endpoint: openstacksdk's proxy for it has no API
        return ('project %s not checked in Keystone (the cloud has no '
                'identity endpoint); only its id format was checked'
                % project)
    except (os_exc.SDKException, ks_exc.ClientException) as exc:
        return ('project %s not checked in Keystone (%s); only its id '
                'format was checked' % (project, str(exc).splitlines()[0]
                                        if str(exc) else type(exc).__name__))
    return None


def parse_addresses(values) -> list[str]:
    out = []
    for value in values or ():
        try:
            out.append(naming.normalize_pci_address(value))
        except ValueError as exc:
            raise exception.InvalidArgument(
                argument='--gpu', value=repr(value),
                reason='%s; give the PCI address gpu-nova-ext discover or '
                       'audit shows (0000:3b:00.0)' % exc)
    return out


# -- Placement ----------------------------------------------------------------

def _root(placement, host: str) -> dict:
    """The compute node provider of ``host`` (its name, or host.domain)."""
    body = placement.get('/resource_providers?name=%s'
                         % urllib.parse.quote(host),
                         version=pclient.PROVIDERS_VERSION)
    roots = [p for p in body['resource_providers']
             if not p.get('parent_provider_uuid')]
    if roots:
        return roots[0]
    body = placement.get('/resource_providers',
                         version=pclient.PROVIDERS_VERSION)
    fqdn = [p for p in body['resource_providers']
            if not p.get('parent_provider_uuid')
            and p['name'].startswith(host + '.')]
    if len(fqdn) == 1:
        return fqdn[0]
    raise exception.UnknownHost(host=host, where='Placement (no compute node '
                                                 'resource provider)')


def _traits(placement, uuid: str) -> tuple[set[str], int]:
    body = placement.get('/resource_providers/%s/traits' % uuid,
                         version=pclient.TRAITS_VERSION)
    return set(body['traits']), body['resource_provider_generation']


def host_gpu_providers(placement, host: str) -> dict[str, list[GpuProvider]]:
    """PCI address -> the GPU providers of ``host`` named after it."""
    root = _root(placement, host)
    node = root['name']
    body = placement.get('/resource_providers?in_tree=%s' % root['uuid'],
                         version=pclient.PROVIDERS_VERSION)
    out: dict[str, list[GpuProvider]] = {}
    for p in body['resource_providers']:
        if p['uuid'] == root['uuid']:
            continue
        address = audit.provider_address(p['name'])
        if address is None:
            continue
        if p['name'] == naming.pgpu_provider_name(node, address):
            kind = KIND_PGPU
        elif p['name'] == naming.own_provider_name(node, address):
            kind = KIND_OWN
        elif p['name'] == naming.pci_provider_name(node, address):
            kind = KIND_PCI
        else:
            continue
        out.setdefault(address, []).append(GpuProvider(
            uuid=p['uuid'], name=p['name'], kind=kind, address=address))
    return out


def gpu_providers(placement, host: str, address: str) -> list[GpuProvider]:
    found = host_gpu_providers(placement, host)
    providers = found.get(address)
    if not providers:
        raise exception.ReservationError(
            what='GPU %s on %s' % (address, host),
            reason='Placement has no GPU provider for it (GPU providers '
                   'there: %s)' % (', '.join(sorted(found)) or 'none'),
            fix='Give an address openstack gpu list shows for that host; '
                'for vGPUs on SR-IOV VFs give each VF\'s address.')
    pci = [p for p in providers if p.kind == KIND_PCI]
    if pci:
        raise exception.ReservationError(
            what='GPU %s on %s' % (address, host),
            reason='it is a PCI-in-Placement provider (%s), whose traits '
                   'nova-compute rewrites at its next update, so a '
                   'reservation trait there would vanish' % pci[0].name,
            fix='Reserve the whole host instead (reserve --project P '
                '--host %s, without --gpu), or give the trait through '
                '[pci] device_spec traits.' % host)
    return providers


def _write_traits(placement, uuid: str, change) -> bool:
    """Apply ``change(traits) -> new traits`` generation-checked.

    :returns: True when something was written.
    """
    path = '/resource_providers/%s/traits' % uuid

    def build():
        traits, generation = _traits(placement, uuid)
        new = change(set(traits))
        if new == traits:
            return None
        return {'traits': sorted(new),
                'resource_provider_generation': generation}

    return placement.write_generation_checked(
        'PUT', path, build, version=pclient.TRAITS_VERSION) is not None


def _owner(traits) -> str | None:
    for trait in sorted(traits):
        project = naming.reservation_project(trait)
        if project is not None:
            return project
    return None


def reserve_gpu(placement, project: str, host: str, address: str,
                force: bool = False) -> list[str]:
    """Put ``project``'s reservation trait on the GPU's providers.

    :raises ReservationError: a PCI-in-Placement GPU, no such GPU, or a
        GPU reserved for another project (unless ``force``: then it
        moves).
    :returns: what was done, one line each.
    """
    trait = check_project_format(project)
    providers = gpu_providers(placement, host, address)

    def others_of(traits) -> list[str]:
        others = sorted({naming.reservation_project(t) for t in traits}
                        - {None, project})
        if others and not force:
            raise exception.ReservationError(
                what='GPU %s on %s' % (address, host),
                reason='it is reserved for project %s' % ', '.join(others),
                fix='Run unreserve for that project first, or pass --force '
                    'to move the reservation to %s.' % project)
        return others

    # every provider is checked before any is written
    for p in providers:
        traits, _gen = _traits(placement, p.uuid)
        if p.kind == KIND_OWN and naming.OWNER_TRAIT not in traits:
            raise exception.ReservationError(
                what='GPU %s on %s' % (address, host),
                reason='provider %s is not gpu-nova-agent\'s (no %s)'
                       % (p.name, naming.OWNER_TRAIT),
                fix='Reserve the whole host instead.')
        others_of(traits)
    placement.put('/traits/%s' % trait, version=pclient.TRAITS_VERSION)
    done = []
    for p in providers:
        moved: list[str] = []

        def change(traits):
            # checked again on each (re-)read: a reservation made
            # meanwhile by someone else is not dropped without --force
            moved[:] = others_of(traits)
            kept = {t for t in traits
                    if naming.reservation_project(t) is None}
            return kept | {trait}
        if _write_traits(placement, p.uuid, change):
            done.append('reserved GPU %s on %s for project %s (trait %s on '
                        '%s)%s' % (address, host, project, trait, p.name,
                                   ' (moved from project %s: --force)'
                                   % ', '.join(moved) if moved else ''))
        else:
            done.append('GPU %s on %s is reserved for project %s already '
                        '(%s)' % (address, host, project, p.name))
    return done


def unreserve_gpu(placement, project: str, host: str,
                  address: str) -> list[str]:
    """Remove ``project``'s reservation trait from the GPU's providers."""
    trait = check_project_format(project)
    providers = gpu_providers(placement, host, address)
    done = []
    for p in providers:
        traits, _gen = _traits(placement, p.uuid)
        if trait not in traits:
            owner = _owner(traits)
            if owner is not None:
                raise exception.ReservationError(
                    what='GPU %s on %s' % (address, host),
                    reason='it is reserved for project %s, not %s'
                           % (owner, project),
                    fix='Give --project %s to remove that reservation.'
                        % owner)
            done.append('GPU %s on %s was not reserved (%s): nothing to do'
                        % (address, host, p.name))
            continue
        _write_traits(placement, p.uuid, lambda t: t - {trait})
        done.append('unreserved GPU %s on %s for project %s (%s)'
                    % (address, host, project, p.name))
    return done


def trait_reservations(placement, project: str | None = None
                       ) -> list[Reservation]:
    """The GPUs reserved by trait (all projects, or one)."""
    if project is not None:
        names = [check_project_format(project)]
    else:
        body = placement.get('/traits?name=startswith:%s'
                             % naming.RESERVATION_PREFIX,
                             version=pclient.TRAITS_VERSION)
        names = sorted(body['traits'])
    roots: dict[str, str] = {}
    out: dict[tuple, Reservation] = {}
    for trait in names:
        owner = naming.reservation_project(trait)
        if owner is None:
            continue
        body = placement.get('/resource_providers?required=%s' % trait,
                             version=pclient.PROVIDERS_VERSION)
        for p in body['resource_providers']:
            root = p.get('root_provider_uuid') or p['uuid']
            if root not in roots:
                roots[root] = placement.get(
                    '/resource_providers/%s' % root,
                    version=pclient.PROVIDERS_VERSION)['name']
            traits, _gen = _traits(placement, p['uuid'])
            model = next((t[len('CUSTOM_GPU_MODEL_'):] for t in
                          sorted(traits)
                          if t.startswith('CUSTOM_GPU_MODEL_')), None)
            address = audit.provider_address(p['name'])
            key = (owner, roots[root], address or p['name'])
            entry = out.get(key)
            if entry is None:
                entry = out[key] = Reservation(
                    project=owner, host=roots[root],
                    gpu=address or p['name'], model=model,
                    mechanism=MECHANISM_TRAIT)
            entry.providers.append(p['uuid'])
    return sorted(out.values(), key=lambda r: (r.project, r.host,
                                               r.gpu or ''))
