# SPDX-License-Identifier: Apache-2.0

"""A real Keystone for Nova's functional harness and for our CLI.

:class:`KeystoneServer` starts :mod:`keystone_server` once per test
process (about 8 s on a quiet machine: migrations and bootstrap, each
step within the tests' deadline); :class:`UnifiedLimits`
is the per-test fixture: it registers a ``compute`` service and endpoint,
points Nova's ``[quota] driver`` and ``[oslo_limit]`` at that Keystone as
an operator does, and removes every limit and registered limit when the
test ends, so tests do not see each other's limits.

Both sides talk to the same Keystone over HTTP: Nova's oslo.limit (and
``nova.limit.utils``) with a system-scoped password login, our CLI through
python-openstackclient (:meth:`UnifiedLimits.auth` in clouds.yaml).
"""
import atexit
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import uuid

import fixtures
from keystoneauth1.identity import v3
from keystoneauth1 import loading as ks_loading
from keystoneauth1 import session as ks_session
from nova import conf as nova_conf
from nova.limit import utils as nova_limit_utils
import openstack

from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.nova import keystone_server

COMPUTE_URL = 'http://compute.invalid/v2.1'
# Nova's tests give each test its own temporary directory, removed when
# the test ends (NestedTempfile): Keystone outlives tests, so its files go
# where temporary files went when this module was imported.
_TMP = tempfile.gettempdir()

_SERVER = None


class KeystoneServer:
    """One Keystone process, stopped when the test process exits."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix='gpu-nova-ext-keystone-',
                                    dir=_TMP)
        self.log = open(os.path.join(self.dir, 'keystone.log'), 'w')
        self.proc = subprocess.Popen(
            [sys.executable, '-m', keystone_server.__name__, self.dir],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True)
        # Keystone's own output goes to the log; stdout says each start-up
        # step done (STEP ...), then the port
        lines = queue.Queue()
        threading.Thread(target=self._read, args=(lines,),
                         daemon=True).start()
        step = 'start'
        while True:
            try:
                line = lines.get(timeout=deadline.WAIT_S)
            except queue.Empty:
                why = 'no step done within %ss' % deadline.WAIT_S
            else:
                if line and line.startswith('PORT '):
                    break
                if line and line.startswith('STEP '):
                    step = line.split()[1]
                    continue
                why = 'it said %r' % line if line else 'it exited'
            self.proc.kill()
            raise RuntimeError(
                'Keystone did not start: %s after %s (exit %s); see %s'
                % (why, step, self.proc.wait(), self.log.name))
        self.url = 'http://127.0.0.1:%d/v3' % int(line.split()[1])
        atexit.register(self.stop)

    def _read(self, lines: queue.Queue) -> None:
        for line in self.proc.stdout:
            lines.put(line)
        lines.put(None)

    def stop(self):
        self.proc.terminate()
        self.proc.wait()
        self.log.close()
        if not os.environ.get("GPU_NOVA_EXT_KEEP_KEYSTONE"):
            shutil.rmtree(self.dir, ignore_errors=True)


def server() -> KeystoneServer:
    global _SERVER
    if _SERVER is None:
        _SERVER = KeystoneServer()
    return _SERVER


def admin_session(url: str, system: bool = True) -> ks_session.Session:
    """The bootstrap admin: system scope (limits) or project ``admin``."""
    scope = (dict(system_scope='all') if system else
             dict(project_name='admin', project_domain_id='default'))
    return ks_session.Session(auth=v3.Password(
        auth_url=url, username='admin', user_domain_id='default',
        password=keystone_server.PASSWORD, **scope))


class UnifiedLimits(fixtures.Fixture):
    """Nova enforcing unified limits from the real Keystone."""

    def __init__(self, testcase):
        super().__init__()
        self.testcase = testcase

    def _setUp(self):
        self.url = server().url
        self.conn = self.connection()
        ident = self.conn.identity
        services = list(ident.services(type='compute'))
        self.service = services[0] if services else ident.create_service(
            type='compute', name='nova')
        endpoints = list(ident.endpoints(service_id=self.service.id))
        self.endpoint = endpoints[0] if endpoints else ident.create_endpoint(
            service_id=self.service.id, interface='public',
            region_id=keystone_server.REGION, url=COMPUTE_URL)
        self.addCleanup(self._remove_limits)
        # Nova and oslo.limit keep their Keystone connection in globals
        self.useFixture(fixtures.MonkeyPatch(
            'oslo_limit.limit._SDK_CONNECTION', None))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.limit.utils.IDENTITY_CLIENT', None))
        # keystoneauth registers a plugin's options when it loads it:
        # register the password plugin's now to set them, and unregister
        # them after the test (auth_url is required once registered)
        CONF = nova_conf.CONF
        ks_loading.register_auth_conf_options(CONF, 'oslo_limit')
        opts = [o for o in ks_loading.get_auth_plugin_conf_options(
            'password') if o.dest not in CONF.oslo_limit]
        CONF.register_opts(opts, group='oslo_limit')
        self.addCleanup(self._unregister, CONF, opts)
        conf = self.testcase
        conf.flags(driver=nova_limit_utils.UNIFIED_LIMITS_DRIVER,
                   group='quota')
        conf.flags(auth_type='password', auth_url=self.url,
                   username='admin', password=keystone_server.PASSWORD,
                   user_domain_id='default', system_scope='all',
                   endpoint_id=self.endpoint.id, group='oslo_limit')

    @staticmethod
    def _unregister(conf, opts, group='oslo_limit'):
        conf.reset()  # as Nova's ConfFixture does at its own cleanup
        conf.unregister_opts(opts, group=group)

    def connection(self) -> openstack.connection.Connection:
        """openstacksdk as our CLI gets it from clouds.yaml (system admin)."""
        return openstack.connection.Connection(
            session=admin_session(self.url), region_name=None)

    def auth(self) -> dict:
        """clouds.yaml's ``auth`` of the system admin (limits need it)."""
        return {'auth_url': self.url, 'username': 'admin',
                'user_domain_id': 'default',
                'password': keystone_server.PASSWORD,
                'system_scope': 'all'}

    def member_auth(self, project) -> dict:
        """clouds.yaml's ``auth`` of a new member of ``project``."""
        ident = self.conn.identity
        password = uuid.uuid4().hex
        user = ident.create_user(name='u-%s' % uuid.uuid4().hex[:8],
                                 domain_id='default', password=password)
        role = ident.find_role('member')
        ident.assign_project_role_to_user(project, user, role)
        return {'auth_url': self.url, 'username': user.name,
                'user_domain_id': 'default', 'password': password,
                'project_id': project.id}

    def project(self, name: str | None = None):
        """A new Keystone project (its id is what Nova sees)."""
        return self.conn.identity.create_project(
            name=name or 'p-%s' % uuid.uuid4().hex[:8], domain_id='default')

    def register(self, resource_name: str, default: int):
        """A registered limit (cloud-wide default) for the compute service."""
        return self.conn.identity.create_registered_limit(
            service_id=self.service.id, region_id=keystone_server.REGION,
            resource_name=resource_name, default_limit=default)

    def _remove_limits(self):
        ident = self.conn.identity
        for lim in list(ident.limits()):
            ident.delete_limit(lim)
        for reg in list(ident.registered_limits()):
            ident.delete_registered_limit(reg)
