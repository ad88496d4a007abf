# SPDX-License-Identifier: Apache-2.0

"""Typed errors of gpu_nova_ext.

Each message names the thing that is wrong and, where there is one, the
fix.  Command-line entry points turn a GpuNovaExtException into one line on
stderr and exit code 2 (a traceback only with ``--debug``).
"""


class GpuNovaExtException(Exception):
    """Base class: ``msg_fmt`` is formatted with the keyword arguments."""

    msg_fmt = 'An unknown gpu_nova_ext error occurred.'

    def __init__(self, message: str | None = None, **kwargs):
        self.kwargs = kwargs
        if message is None:
            try:
                message = self.msg_fmt % kwargs
            except (KeyError, TypeError, ValueError):
                # A wrong format argument must not hide the real error.
                message = '%s (%s)' % (self.msg_fmt, kwargs)
        super().__init__(message)

    def format_message(self) -> str:
        return str(self)


class ConfigError(GpuNovaExtException):
    msg_fmt = 'Configuration error: %(reason)s'


class InvalidOption(ConfigError):
    msg_fmt = ('Invalid value %(value)r for option [%(group)s] %(option)s: '
               '%(reason)s')


class InvalidArgument(GpuNovaExtException):
    msg_fmt = 'Invalid %(argument)s %(value)s: %(reason)s'


class PluginLoadError(GpuNovaExtException):
    msg_fmt = ('Could not load %(namespace)s plugin %(name)r: %(reason)s. '
               'Installed plugins: %(available)s.')


class LibvirtUnavailable(GpuNovaExtException):
    msg_fmt = ('Cannot connect to libvirt at %(uri)s: %(reason)s. Check that '
               'libvirtd runs and [agent] libvirt_uri (or --libvirt-uri) is '
               'right.')


class LibvirtHostFileError(LibvirtUnavailable):
    msg_fmt = ('Cannot use the libvirt test-driver host file %(path)s (from '
               '%(uri)s): %(reason)s. Fix the file, or point [agent] '
               'libvirt_uri (or --libvirt-uri) at a readable host XML.')


class InventoryError(GpuNovaExtException):
    msg_fmt = 'GPU inventory error in %(source)s: %(reason)s'


class PlacementUnavailable(GpuNovaExtException):
    msg_fmt = ('Placement is unreachable at %(endpoint)s: %(reason)s. Check '
               'the [placement] options and that the service runs.')


class CloudPlacementUnavailable(PlacementUnavailable):
    msg_fmt = ('Placement is unreachable at %(endpoint)s: %(reason)s. Check '
               "the cloud's service catalog (openstack catalog list) or "
               'placement_endpoint_override in clouds.yaml.')


class PlacementTooOld(GpuNovaExtException):
    msg_fmt = ('Placement at %(endpoint)s serves microversions up to '
               '%(served)s; openstack gpu needs %(needed)s or later. '
               'Upgrade Placement.')


class PlacementTimeout(PlacementUnavailable):
    msg_fmt = ('Placement at %(endpoint)s did not answer %(method)s %(url)s '
               'within %(timeout)s seconds ([placement] timeout). Check that '
               'the service runs and answers.')


class IdentityUnavailable(PlacementUnavailable):
    msg_fmt = ('Cannot get a token from Keystone at %(auth_url)s to reach '
               'Placement: %(reason)s. Check the [placement] auth_url and '
               'credentials, and that Keystone runs.')


class PlacementAPIError(GpuNovaExtException):
    msg_fmt = ('Placement answered %(status)s to %(method)s %(url)s '
               '(request id %(request_id)s): %(detail)s')


class PlacementConflict(PlacementAPIError):
    msg_fmt = ('Placement kept answering 409 to %(method)s %(url)s after '
               '%(retries)s retries: %(detail)s')


class PlacementInvalidResponse(PlacementAPIError):
    msg_fmt = ('Placement answered %(method)s %(url)s (request id '
               '%(request_id)s) with a body the API does not document: '
               '%(detail)s')


class ComputeNodeNotFound(GpuNovaExtException):
    msg_fmt = ('No compute node resource provider named %(host)r in '
               'Placement yet. Start nova-compute on this host, or set '
               '[DEFAULT] host to the hypervisor hostname nova-compute uses.')


class InvalidStatePayload(GpuNovaExtException):
    msg_fmt = 'Rejected GPU state payload from %(host)s: %(reason)s'


class InvalidExtraSpec(GpuNovaExtException):
    msg_fmt = ('Invalid flavor extra spec %(key)s=%(value)r: %(reason)s. '
               'Allowed: %(allowed)s')


class ScenarioError(GpuNovaExtException):
    msg_fmt = 'Scenario %(file)s, %(entry)s: %(reason)s'


class UnknownHost(GpuNovaExtException):
    msg_fmt = ('No host %(host)r in %(where)s. Give the name nova-compute '
               'reports (openstack compute service list --service '
               'nova-compute).')


class ServerGone(GpuNovaExtException):
    msg_fmt = ('Server %(server)s no longer exists in Nova; nothing to move. '
               'Check it with openstack server show %(server)s.')


class ComputeUnavailable(GpuNovaExtException):
    msg_fmt = ('The compute API is unreachable%(cloud)s: %(reason)s. Check '
               'clouds.yaml (--os-cloud, OS_CLOUD, [remediation] cloud) or '
               'the OS_* variables, and that nova-api runs.')


class NovaRefused(GpuNovaExtException):
    msg_fmt = ('Nova refused to %(action)s server %(server)s: %(reason)s. '
               '%(fix)s')


class UndrainRefused(GpuNovaExtException):
    msg_fmt = 'Not re-enabling %(host)s: %(reason)s. %(fix)s'


class ReservationError(GpuNovaExtException):
    """A reservation that cannot be made or removed as asked."""

    msg_fmt = '%(what)s: %(reason)s. %(fix)s'
