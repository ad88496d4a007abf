# SPDX-License-Identifier: Apache-2.0

"""Remediation and drains against Nova's functional harness.

The controller talks to the harness's Nova API through openstacksdk (as
with clouds.yaml) and to its Placement through our PlacementClient
(keystoneauth, ``admin_token``); notifications travel on the harness's
``fake:/`` transport, where our agent's ``gpu.health.update`` and the
controller's listener meet.
"""
import os
import urllib.parse

import fixtures
from oslo_config import cfg

from gpu_nova_ext.cmd import cli
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import remediate
from gpu_nova_ext.placement import client as placement_client
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.operator import sdk
from gpu_nova_ext.tests.functional import osc_client


class OpsMixin:
    """A remediation controller for the harness's cloud."""

    def ops_conf(self, **remediation) -> cfg.ConfigOpts:
        """The CLI's configuration, loaded from a file as the CLI does."""
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'gpu-nova-ext.conf')
        settings = dict(enabled=True, poll_interval=0.05, retry_backoff=0,
                        max_retries=0,
                        action_timeout=int(deadline.WAIT_S))
        settings.update(remediation)
        with open(path, 'w') as f:
            f.write(OPS_CONF % {'placement': self.placement.fixture.endpoint})
            # in the file too: openstack gpu host drain reads it
            f.write('[remediation]\n' + ''.join(
                '%s = %s\n' % kv for kv in settings.items()))
        conf = cfg.ConfigOpts()
        gconf.register_opts(conf)
        conf(['--config-file', path], project='gpu-nova-ext',
             default_config_files=[])
        for name, value in settings.items():
            conf.set_override(name, value, group='remediation')
        return conf

    def use_openstack_gpu(self, conf: cfg.ConfigOpts) -> None:
        """``openstack gpu`` against the harness (:meth:`gpu`).

        clouds.yaml of the harness; ``conf``'s file for the commands that
        take ``--config-file``; the agents' state as the harness's
        nova-scheduler holds it (:func:`harness_live_states`).
        """
        self.gpu_conf_file = conf.config_file[0]
        self.useFixture(osc_client.Cloud.of_harness(self))
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.operator.live_state.live_states',
            harness_live_states))

    def gpu(self, *argv, config: bool = False):
        """``openstack gpu ARGV``: (0, stdout); the test fails else."""
        extra = ('--config-file', self.gpu_conf_file) if config else ()
        rc, out, err = osc_client.openstack('gpu', *argv, *extra)
        self.assertEqual(0, rc, err)
        return rc, out

    def gpu_refused(self, *argv, config: bool = False) -> str:
        """``openstack gpu ARGV`` that must be refused: its error line."""
        extra = ('--config-file', self.gpu_conf_file) if config else ()
        return osc_client.refused(self, 'gpu', *argv, *extra)

    def agent_conf(self, host):
        """The agent's configuration, retrying Placement as by default.

        After a migration nova-compute rewrites its providers while the
        agent writes traits; Placement answers such a race with a 500 that
        the agent retries (``[placement] max_request_retries``, 3 by
        default, 0 in the shared harness configuration).
        """
        conf = super().agent_conf(host)
        conf.set_override('max_request_retries', 3, group='placement')
        return conf

    def conn_factory(self, cloud=None):
        return sdk.harness_connection(self)

    def placement_factory(self, conf):
        return placement_client.PlacementClient(conf)

    def remediator(self, conf, **kw) -> remediate.Remediator:
        self.lines = []
        return remediate.Remediator(
            conf, self.conn_factory(), self.placement_factory(conf),
            report=self.lines.append, **kw)

    def cli(self, conf, *argv, **kw):
        """Run one command as gpu-nova-ext does; returns (rc, stdout).

        ``kw`` goes to the command's ``run`` (``sweep=`` of remediate).
        """
        stdout = self.useFixture(fixtures.StringStream('stdout'))
        self.useFixture(fixtures.MonkeyPatch('sys.stdout', stdout.stream))
        args = cli.build_parser().parse_args(list(argv))
        try:
            rc = args.func(args, conf, conn_factory=self.conn_factory,
                           placement_factory=self.placement_factory, **kw)
        finally:
            stdout.stream.flush()
            self.stdout = stdout.getDetails()['stdout'].as_text()
        return rc, self.stdout

    def server_host(self, server_id: str) -> str:
        return self.api.get_server(server_id)['OS-EXT-SRV-ATTR:host']

    def set_metadata(self, server_id: str, metadata: dict) -> None:
        self.api.api_post('/servers/%s/metadata' % server_id,
                          {'metadata': metadata})

    def use_migrate_stub(self):
        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.libvirt.Domain.migrateToURI3',
            self._migrate_stub))

    def _migrate_stub(self, domain, destination, params, flags):
        """fakelibvirt's migrateToURI3 for any pair of hosts.

        As Nova's LibvirtMigrationMixin, for a migration between any two
        of the harness's hosts: the domain appears on the host named in
        the destination URI, the source job completes.
        """
        dest = urllib.parse.urlparse(destination).hostname
        self.computes[dest].driver._host.get_connection().createXML(
            params['destination_xml'],
            'fake-createXML-doesnt-care-about-flags')
        domain.complete_job()


def harness_live_states(conf, wait):
    """The agents' state as the harness's nova-scheduler holds it.

    Cast by the real agent over the harness's transport into the real
    cache (a command's own listener would stop the scheduler's).
    """
    cache = state_cache.get_cache()
    return {host: cache.get(host) for host in cache.hosts()}


class LiveMigrationVGPUTestBase(OpsMixin, base.GpuVGPUTestBase):
    """vGPU hosts that can live-migrate to each other."""

    # as Nova's own vGPU live-migration tests: versions that support it
    FAKE_LIBVIRT_VERSION = 8006000
    FAKE_QEMU_VERSION = 8001000

    def setUp(self):
        super().setUp()
        self.use_migrate_stub()

    def start_a100_hosts(self, hosts) -> None:
        """Each host with two A100 pGPUs; openstack gpu pointed at them."""
        for host in hosts:
            self.start_gpu_host(host, {base.PGPU0: base.gpu(base.A100),
                                       base.PGPU1: base.gpu(base.A100)})
        self.use_openstack_gpu(self.ops_conf())


OPS_CONF = """
[DEFAULT]
transport_url = fake:/

[oslo_messaging_notifications]
driver = messagingv2

[placement]
auth_type = admin_token
endpoint = %(placement)s
token = admin
max_request_retries = 0
retry_backoff = 0
"""
