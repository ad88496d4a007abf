# SPDX-License-Identifier: Apache-2.0

"""Keystone's unified limits for Nova's service, through openstacksdk.

Limits are kept per service and region.  Nova's oslo.limit finds both
from ``[oslo_limit] endpoint_id`` (or ``endpoint_service_type`` and
``endpoint_region_name``); :class:`LimitStore` finds them the same way:
from ``--endpoint-id``, else from the one ``compute`` service of the
catalog and the one region of its endpoints.
"""
from gpu_nova_ext import exception

POLICY_FIX = ('Keystone lets an admin with system scope manage limits: '
              'authenticate with OS_SYSTEM_SCOPE=all (clouds.yaml: '
              'system_scope: all).')


def _sdk_exc():
    from openstack import exceptions as os_exc
    return os_exc


def keystone_error(exc, what: str) -> exception.GpuNovaExtException:
    """One line for a failed Keystone call, naming the fix."""
    os_exc = _sdk_exc()
    if isinstance(exc, os_exc.ForbiddenException):
        return exception.GpuNovaExtException(
            'Keystone refused to %s (403: %s). %s' % (
                what, getattr(exc, 'details', None) or exc, POLICY_FIX))
    return exception.GpuNovaExtException(
        'Keystone could not %s: %s' % (what, exc))


class LimitStore:
    """Registered limits and project limits of Nova's service."""

    def __init__(self, conn, endpoint_id: str | None = None,
                 region: str | None = None):
        self.conn = conn
        self.identity = conn.identity
        self._check_unified_limits()
        self.service_id, self.region_id = self._locate(endpoint_id, region)

    def _check_unified_limits(self) -> None:
        os_exc = _sdk_exc()
        try:
            resp = self.identity.get('/limits/model')
            os_exc.raise_from_response(resp)
            self.model = resp.json()['model']['name']
        except os_exc.NotFoundException:
            raise exception.GpuNovaExtException(
                'Keystone at %s has no unified limits API (/v3/limits): '
                'quota per GPU model needs Keystone Queens or newer, and '
                "Nova's [quota] driver = nova.quota.UnifiedLimitsDriver."
                % self._url())
        except os_exc.SDKException as exc:
            raise keystone_error(exc, 'show its limit model')

    def _url(self) -> str:
        try:
            return self.identity.get_endpoint() or 'the identity endpoint'
        except Exception:
            return 'the identity endpoint'

    def _locate(self, endpoint_id, region):
        os_exc = _sdk_exc()
        try:
            if endpoint_id:
                endpoint = self.identity.get_endpoint(endpoint_id)
                return endpoint.service_id, endpoint.region_id
            services = list(self.identity.services(type='compute'))
            if len(services) != 1:
                raise exception.GpuNovaExtException(
                    "Keystone's catalog has %d services of type compute: "
                    "pass --endpoint-id, the endpoint Nova's [oslo_limit] "
                    'endpoint_id names.' % len(services))
            service_id = services[0].id
            if region:
                return service_id, region
            regions = {e.region_id for e in self.identity.endpoints(
                service_id=service_id)}
        except os_exc.NotFoundException:
            raise exception.GpuNovaExtException(
                'Keystone has no endpoint %r: pass the endpoint id of '
                "Nova's [oslo_limit] endpoint_id." % endpoint_id)
        except os_exc.SDKException as exc:
            raise keystone_error(exc, 'list the compute service')
        if len(regions) > 1:
            raise exception.GpuNovaExtException(
                'The compute service has endpoints in regions %s: pass '
                '--region (limits are kept per region).'
                % ', '.join(sorted(str(r) for r in regions)))
        return service_id, (regions.pop() if regions else None)

    # -- reads -------------------------------------------------------------

    def _mine(self, items):
        return [i for i in items if i.service_id == self.service_id
                and i.region_id == self.region_id]

    def registered(self) -> dict:
        """Registered limits by resource name."""
        try:
            items = self.identity.registered_limits(
                service_id=self.service_id)
            return {r.resource_name: r for r in self._mine(items)}
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'list registered limits')

    def project_limits(self, project_id: str | None = None) -> list:
        """Project limits (of one project, or all)."""
        query = dict(service_id=self.service_id)
        if project_id:
            query['project_id'] = project_id
        try:
            return self._mine(self.identity.limits(**query))
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'list project limits')

    def find_project(self, name_or_id: str):
        try:
            project = self.identity.find_project(name_or_id,
                                                 ignore_missing=True)
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'look up project %r' % name_or_id)
        if project is None:
            raise exception.InvalidArgument(
                'Keystone has no project %r: give a project name or id '
                '(openstack project list).' % name_or_id)
        return project

    # -- writes ------------------------------------------------------------

    def set_default(self, resource_name: str, limit: int, existing=None):
        """Create or update the registered limit; returns it."""
        try:
            if existing is not None:
                return self.identity.update_registered_limit(
                    existing, default_limit=limit)
            return self.identity.create_registered_limit(
                service_id=self.service_id, region_id=self.region_id,
                resource_name=resource_name, default_limit=limit)
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'set the default of %s'
                                 % resource_name)

    def set_project(self, project_id: str, resource_name: str, limit: int,
                    existing=None):
        try:
            if existing is not None:
                return self.identity.update_limit(existing,
                                                  resource_limit=limit)
            return self.identity.create_limit(
                service_id=self.service_id, region_id=self.region_id,
                project_id=project_id, resource_name=resource_name,
                resource_limit=limit)
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'set the limit of %s' % resource_name)

    def delete_project(self, limit) -> None:
        try:
            self.identity.delete_limit(limit)
        except _sdk_exc().SDKException as exc:
            raise keystone_error(exc, 'remove the limit of %s'
                                 % limit.resource_name)

    def delete_default(self, registered) -> None:
        try:
            self.identity.delete_registered_limit(registered)
        except _sdk_exc().SDKException as exc:
            raise keystone_error(
                exc, 'remove the default of %s (project limits of it must '
                'go first: quota unset --project P)'
                % registered.resource_name)
