# SPDX-License-Identifier: Apache-2.0

"""What ``openstack gpu`` commands talk to, from osc-lib's session.

:class:`GpuClient` holds, made on first use:

* ``conn``: the openstacksdk connection of osc-lib's ClientManager (Nova,
  Keystone);
* ``placement``: our :class:`~gpu_nova_ext.placement.client.PlacementClient`
  over a keystoneauth adapter on the same session (the catalog's
  ``placement`` endpoint, or ``placement_endpoint_override`` of
  clouds.yaml), once Placement said it serves the microversion we need;
* ``conf``: gpu-nova-ext's options, from ``--config-file`` where a command
  takes one (the message bus of ``--state-wait``, ``[remediation]``);
  without one, the defaults and the usual configuration files.
"""
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import discover
from keystoneauth1 import exceptions as ks_exc
from oslo_config import cfg

from gpu_nova_ext.cmd import common
from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext.placement import client as placement_client

#: the oldest Placement microversion every command works with
PLACEMENT_MIN_VERSION = placement_client.BASE_VERSION


class GpuClient:
    """Nova, Keystone and Placement for one ``openstack gpu`` command."""

    def __init__(self, instance):
        self.instance = instance
        self._placement = None
        self._conf = None

    @property
    def conn(self):
        """openstacksdk's connection, as ``openstack server ...`` uses."""
        return self.instance.sdk_connection

    def load_conf(self, files: list[str] | None = None) -> cfg.ConfigOpts:
        """gpu-nova-ext's options; bad files and values are typed errors."""
        files = files or []
        common.check_config_files(files, [])
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        args = []
        for path in files:
            args += ['--config-file', path]
        conf(args, project=common.PROJECT, prog='openstack gpu',
             default_config_files=[] if files else None,
             default_config_dirs=[])
        common.validate_all(conf)
        self._conf = conf
        return conf

    @property
    def conf(self) -> cfg.ConfigOpts:
        return self._conf or self.load_conf()

    @property
    def placement(self) -> placement_client.PlacementClient:
        if self._placement is None:
            inst = self.instance
            adapter = ks_adapter.Adapter(
                session=inst.session, service_type='placement',
                interface=inst.interface, region_name=inst.region_name,
                endpoint_override=inst.get_configuration().get(
                    'placement_endpoint_override'),
                **placement_client.retry_arguments(self.conf.placement))
            check_microversion(adapter)
            self._placement = placement_client.PlacementClient(
                self.conf, adapter=adapter)
        return self._placement


def check_microversion(adapter) -> None:
    """Refuse, naming both versions, a Placement too old for our commands.

    keystoneauth's endpoint data (its discovery of Placement's root
    document, ``GET /``, no token needed) says the newest microversion
    Placement serves.
    """
    endpoint = '?'
    try:
        endpoint = adapter.get_endpoint() or '?'
        data = adapter.get_endpoint_data()
    except ks_exc.EndpointNotFound as exc:
        raise exception.CloudPlacementUnavailable(
            endpoint='(no placement endpoint in the service catalog)',
            reason=str(exc))
    except ks_exc.ClientException as exc:
        raise exception.CloudPlacementUnavailable(
            endpoint=endpoint, reason=str(exc))
    served = data.max_microversion if data is not None else None
    if served is None:
        raise exception.CloudPlacementUnavailable(
            endpoint=endpoint, reason='its root document (GET /) does not '
            "list Placement's microversions")
    if served < discover.normalize_version_number(PLACEMENT_MIN_VERSION):
        raise exception.PlacementTooOld(
            endpoint=endpoint, served=discover.version_to_string(served),
            needed=PLACEMENT_MIN_VERSION)
