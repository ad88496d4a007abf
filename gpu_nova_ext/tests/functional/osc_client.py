# SPDX-License-Identifier: Apache-2.0

"""python-openstackclient, in this process, aimed at our test services.

``openstack gpu ...`` runs as an operator runs it: OpenStackClient's own
shell (``openstackclient.shell.main``) loads our plugin by its entry points
(``openstack.cli.extension``, ``openstack.gpu.v1`` of the editable
install) and finds the cloud by ``OS_CLOUD`` alone in a clouds.yaml
(``OS_CLIENT_CONFIG_FILE``).  It runs in the test's process because Nova's
harness API and Placement's fixture are reached through wsgi-intercept.

The cloud's endpoints are the test's (``*_endpoint_override``).  Nova's
harness API authenticates by header (Keystone is stubbed there) and the
Placement fixture by the noauth2 token: :class:`Cloud` adds those headers
to the session openstacksdk makes from clouds.yaml, as
:func:`gpu_nova_ext.tests.functional.operator.sdk.harness_connection`
does.  With a real Keystone (:meth:`Cloud.keystone`) the login is a real
password login there.
"""
import contextlib
import io
import json
import logging
import os

import fixtures
from openstack.config import cloud_region
import yaml

CLOUD = 'harness'
ADMIN_ROLES = 'reader,member,admin'


class Cloud(fixtures.Fixture):
    """clouds.yaml and ``OS_CLOUD`` for services of a test."""

    def __init__(self, placement_url: str, compute_url: str | None = None,
                 project_id: str = 'admin', roles: str = ADMIN_ROLES):
        super().__init__()
        self.placement_url = placement_url
        self.compute_url = compute_url
        self.project_id = project_id
        self.roles = roles
        self.keystone_auth = None

    @classmethod
    def of_harness(cls, testcase, **kw) -> 'Cloud':
        """The cloud of Nova's functional harness ``testcase``."""
        return cls(testcase.placement.fixture.endpoint,
                   testcase.api_fixture.base_url,
                   project_id=testcase.api.project_id, **kw)

    def _setUp(self):
        self.path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                                 'clouds.yaml')
        for name in [n for n in os.environ if n.startswith('OS_')]:
            self.useFixture(fixtures.EnvironmentVariable(name))
        self.useFixture(fixtures.EnvironmentVariable(
            'OS_CLIENT_CONFIG_FILE', self.path))
        self.useFixture(fixtures.EnvironmentVariable('OS_CLOUD', CLOUD))
        self.write()
        fixture = self
        real = cloud_region.CloudRegion.get_session

        def get_session(region):
            made = region._keystone_session is None
            session = real(region)
            if made:
                session.additional_headers.update(fixture.headers())
            return session

        self.useFixture(fixtures.MonkeyPatch(
            'openstack.config.cloud_region.CloudRegion.get_session',
            get_session))

    def keystone(self, auth: dict) -> None:
        """Log in to a real Keystone (password ``auth`` of clouds.yaml)."""
        self.keystone_auth = auth
        self.write()

    def headers(self) -> dict:
        out = {'X-Auth-User': 'admin' if 'admin' in self.roles else 'user',
               'X-Auth-Project-Id': self.project_id,
               'X-Roles': self.roles}
        if self.keystone_auth is None:
            # Placement's noauth2 wants a token (any, with X-Roles)
            out['X-Auth-Token'] = 'admin'
        return out

    def write(self) -> None:
        cloud = {'placement_endpoint_override': self.placement_url}
        if self.compute_url:
            cloud['compute_endpoint_override'] = self.compute_url
        if self.keystone_auth is None:
            cloud.update(auth_type='none',
                         auth={'endpoint': self.placement_url})
        else:
            cloud.update(auth_type='password', auth=self.keystone_auth,
                         identity_api_version=3)
        with open(self.path, 'w') as f:
            yaml.safe_dump({'clouds': {CLOUD: cloud}}, f)


def openstack(*argv: str) -> tuple[int, str, str]:
    """``openstack ARGV`` with OpenStackClient's shell: (rc, out, err)."""
    from openstackclient import shell
    from osc_lib import clientmanager

    # OpenStackClient keeps a plugin's client on the ClientManager class
    # (one process, one command): forget the previous command's
    cache = vars(clientmanager.ClientManager).get('gpu')
    if cache is not None:
        cache._handle = None
    out, err = io.StringIO(), io.StringIO()
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(
                err):
            try:
                rc = shell.main(list(argv))
            except SystemExit as exc:
                # argparse: usage error (2) or --help (0)
                rc = exc.code
    finally:
        # OpenStackClient configures the root logger for its process
        root.handlers[:] = handlers
        root.setLevel(level)
    return rc, out.getvalue(), err.getvalue()


def refused(testcase, *argv: str) -> str:
    """``openstack ARGV`` that must be refused: exit code 2 and one line.

    The one line is the command's; other lines on stderr can only be the
    logging of the test's own process (Nova's harness loads plugins that
    log), which OpenStackClient sends to stderr too.
    """
    rc, out, err = openstack(*argv)
    testcase.assertEqual(2, rc, out + err)
    ours = [line for line in err.splitlines()
            if line.startswith('openstack ') or 'Traceback' in line]
    testcase.assertEqual(1, len(ours), err)
    testcase.assertTrue(err.rstrip().endswith(ours[0]), err)
    return ours[0]


def openstack_json(testcase, *argv: str):
    """``openstack ARGV -f json``, parsed; the test fails on exit != 0."""
    rc, out, err = openstack(*argv, '-f', 'json')
    testcase.assertEqual(0, rc, 'openstack %s: %s' % (' '.join(argv), err))
    return json.loads(out)


def parser_of(command: str):
    """The argparse parser of ``openstack COMMAND``.

    ``COMMAND`` is ``gpu rollout plan``; found by its entry point, as
    OpenStackClient finds it.
    """
    import importlib.metadata
    import types

    name = command.replace(' ', '_')
    [ep] = [ep for ep in importlib.metadata.entry_points(
        group='openstack.gpu.v1') if ep.name == name]
    # what cliff's Command reads of its application (its hooks' namespace)
    app = types.SimpleNamespace(command_manager=types.SimpleNamespace(
        namespace='openstack.cli'))
    return ep.load()(app, None, cmd_name=command).get_parser(
        'openstack ' + command)
