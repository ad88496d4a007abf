# SPDX-License-Identifier: Apache-2.0

"""A server of each GPU flavor: boot, check its GPU, resize, delete.

One boot test and one resize test per GPU flavor, each named after the
flavor (``test_boot_check_delete[...](gpu.a100.vgpu)``): :func:`load_tests`
makes them when Tempest loads the tests, from ``[gpu_nova_ext] flavors``
or, when that is empty, from the cloud's flavors (read with the admin
credentials of ``[auth]``).  The check: the server's allocation in
Placement holds GPU resources on providers in its own host's tree, and
``openstack gpu show <host> <address>`` (gpu-nova-ext's OpenStackClient
plugin, where Tempest's venv has it) shows the server on that GPU of that
host.  doc/source/tempest.rst.
"""
import json
import os
import sys

from oslo_log import log as logging
from tempest.api.compute import base
from tempest import clients
from tempest.common import credentials_factory
from tempest.common import waiters
from tempest import config
from tempest.lib.cli import base as cli_base
from tempest.lib.common.utils import data_utils
from tempest.lib import decorators
import testscenarios

from gpu_nova_ext import exception
from gpu_nova_ext.tempest_plugin import gpus

CONF = config.CONF
LOG = logging.getLogger(__name__)


def cloud_flavors(flavors_client) -> list[dict]:
    """Every flavor (public and private: an admin's client), with specs."""
    flavors = flavors_client.list_flavors(
        detail=True, is_public='None')['flavors']
    for flavor in flavors:
        flavor['extra_specs'] = flavors_client.list_flavor_extra_specs(
            flavor['id'])['extra_specs']
    return flavors


def scenarios() -> list[tuple[str, dict]]:
    """One scenario per GPU flavor to test, named after it."""
    wanted = CONF.gpu_nova_ext.flavors
    if wanted:
        return [(ref, {'flavor_ref': ref}) for ref in wanted]
    try:
        admin = clients.Manager(
            credentials_factory.get_configured_admin_credentials())
        found = gpus.select_flavors(cloud_flavors(admin.flavors_client), [],
                                    CONF.gpu_nova_ext.exclude_flavors)
    except Exception as exc:  # noqa: B902 - the tests report it
        return [('flavors-unread', {'load_error': (
            "the cloud's flavors could not be read with [auth] admin_* "
            'credentials (%s); set them, or name the GPU flavors in '
            '[gpu_nova_ext] flavors' % exc)})]
    return [(f.name, {'flavor_ref': f.id}) for f in found] or [
        ('no-gpu-flavor', {})]


def load_tests(loader, standard_tests, pattern):
    """The tests of each GPU flavor (unittest's load_tests protocol)."""
    GpuServerTest.scenarios = scenarios()
    suite = loader.suiteClass()
    suite.addTests(testscenarios.generate_scenarios(standard_tests))
    return suite


def _default_cli_dir() -> str:
    here = os.path.dirname(sys.executable)
    return here if os.access(os.path.join(here, 'openstack'),
                             os.X_OK) else ''


class GpuServerTest(base.BaseV2ComputeAdminTest):
    """A server of one GPU flavor (the scenario's) lands on a GPU."""

    credentials = ['primary', 'admin']
    # servers with networks 'none': a GPU needs no network
    min_microversion = '2.37'
    # root_provider_uuid of the GPU providers
    placement_min_microversion = '1.14'

    # set by the scenario
    flavor_ref = None
    load_error = None

    @classmethod
    def setup_clients(cls):
        super().setup_clients()
        cls.placement_client = cls.os_admin.placement_client
        cls.providers_client = cls.os_admin.resource_providers_client

    @classmethod
    def resource_setup(cls):
        super().resource_setup()
        cls.all_flavors = cloud_flavors(cls.admin_flavors_client)
        # what a server may be resized to: the GPU flavors not excluded
        cls.resize_candidates = gpus.select_flavors(
            cls.all_flavors, [], CONF.gpu_nova_ext.exclude_flavors)

    # --- steps -----------------------------------------------------------

    def gpu_flavor(self) -> gpus.GpuFlavor:
        """The scenario's flavor; fails (or skips) saying why not."""
        if self.load_error:
            self.fail(self.load_error)
        if self.flavor_ref is None:
            raise self.skipException(
                'the cloud has no public GPU flavor (none with a gpu: key, '
                'a GPU resource class or a PCI alias)')
        try:
            found = gpus.select_flavors(self.all_flavors, [self.flavor_ref],
                                        CONF.gpu_nova_ext.exclude_flavors)
        except exception.InvalidOption as exc:
            raise self.failureException(str(exc)) from None
        if not found:
            raise self.skipException('%s is in [gpu_nova_ext] '
                                     'exclude_flavors' % self.flavor_ref)
        return found[0]

    def allow(self, flavor: gpus.GpuFlavor) -> None:
        """A private flavor, made usable by the test project meanwhile."""
        if flavor.is_public:
            return
        project = self.os_primary.credentials.project_id
        self.admin_flavors_client.add_flavor_access(flavor.id, project)
        self.addCleanup(self.admin_flavors_client.remove_flavor_access,
                        flavor.id, project)

    def boot(self, flavor: gpus.GpuFlavor) -> str:
        self.allow(flavor)
        server = self.create_test_server(
            flavor=flavor.id, wait_until='ACTIVE',
            name=data_utils.rand_name(prefix=CONF.resource_name_prefix,
                                      name='gpu-' + flavor.name))
        return server['id']

    def check_gpu(self, server_id: str, flavor: gpus.GpuFlavor) -> list:
        """The server holds GPUs on its own host; ``[(host, address)]``."""
        server = self.admin_servers_client.show_server(server_id)['server']
        node = server['OS-EXT-SRV-ATTR:hypervisor_hostname']
        allocations = self.placement_client.list_allocations(
            server_id)['allocations']
        held = gpus.gpu_allocations(allocations)
        self.assertTrue(held, 'server %s of GPU flavor %s holds no GPU in '
                        'Placement; its allocations: %s'
                        % (server_id, flavor.name, allocations))
        found = []
        for provider_id in sorted(held):
            provider = self.providers_client.show_resource_provider(
                provider_id)
            root = self.providers_client.show_resource_provider(
                provider['root_provider_uuid'])
            self.assertEqual(
                node, root['name'],
                'GPU provider %s of server %s is in the tree of %s, not of '
                "the server's host %s" % (provider['name'], server_id,
                                          root['name'], node))
            address = gpus.gpu_address(provider['name'])
            self.assertIsNotNone(
                address, 'GPU provider %s of server %s has no PCI address '
                'in its name' % (provider['name'], server_id))
            found.append((root['name'], address))
        self.check_gpu_show(server_id, found)
        return found

    def check_gpu_show(self, server_id: str, found: list) -> None:
        """``openstack gpu show`` shows the server on each of its GPUs."""
        cli_dir = CONF.gpu_nova_ext.cli_dir or _default_cli_dir()
        if not cli_dir:
            LOG.warning('No openstack command in %s (Tempest\'s venv) and '
                        '[gpu_nova_ext] cli_dir unset: the GPU of server '
                        '%s is checked in Placement only',
                        os.path.dirname(sys.executable), server_id)
            return
        creds = self.os_admin.credentials
        cli = cli_base.CLIClient(
            username=creds.username, password=creds.password,
            tenant_name=creds.project_name, uri=CONF.identity.uri_v3,
            cli_dir=cli_dir, user_domain_name=creds.user_domain_name,
            project_domain_name=creds.project_domain_name,
            identity_api_version='3')
        for host, address in found:
            shown = json.loads(cli.openstack(
                'gpu show', flags='--os-region-name %s'
                % CONF.identity.region, params='%s %s -f json' % (
                    host, address)))
            self.assertEqual(host, shown['Host'], shown)
            self.assertIn(server_id, shown['Servers'],
                          'openstack gpu show %s %s does not list server %s'
                          % (host, address, server_id))

    def delete(self, server_id: str) -> None:
        """Delete the server; its GPUs are free in Placement again."""
        self.servers_client.delete_server(server_id)
        waiters.wait_for_server_termination(self.servers_client, server_id)
        left = gpus.gpu_allocations(self.placement_client.list_allocations(
            server_id)['allocations'])
        self.assertEqual({}, left, 'deleted server %s still holds GPUs in '
                         'Placement' % server_id)

    # --- the tests -------------------------------------------------------

    @decorators.idempotent_id('3c319130-c488-4f83-98be-0e0ffa263c38')
    def test_boot_check_delete(self):
        flavor = self.gpu_flavor()
        server_id = self.boot(flavor)
        self.check_gpu(server_id, flavor)
        self.delete(server_id)

    @decorators.idempotent_id('9c344721-1588-4ef3-865a-6d36fef8f9ef')
    def test_resize(self):
        flavor = self.gpu_flavor()
        if not CONF.compute_feature_enabled.resize:
            raise self.skipException(
                'resize is not enabled ([compute-feature-enabled] resize '
                '= False)')
        target = gpus.resize_target(flavor, self.resize_candidates)
        if target is None:
            raise self.skipException(
                'no second GPU flavor of kind %s, model %s, with disks no '
                'smaller, to resize %s to' % (
                    flavor.kind, flavor.model or 'any', flavor.name))
        server_id = self.boot(flavor)
        self.check_gpu(server_id, flavor)
        self.allow(target)
        self.resize_server(server_id, target.id)
        self.check_gpu(server_id, target)
        self.delete(server_id)
