# SPDX-License-Identifier: Apache-2.0

"""PlacementClient: configuration errors, and keystoneauth's retries
against a real HTTP server on loopback."""
import http.server
import os
import socket
import threading

import fixtures
from oslo_config import cfg
import testtools

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.placement import reporter as preporter


class ConfTestCase(testtools.TestCase):

    def conf(self, text):
        path = os.path.join(self.useFixture(fixtures.TempDir()).path,
                            'agent.conf')
        with open(path, 'w') as f:
            f.write(text)
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf(['--config-file', path], default_config_files=[])
        return conf


class TestClientConfig(ConfTestCase):

    def test_no_auth_type(self):
        exc = self.assertRaises(exception.ConfigError,
                                pclient.PlacementClient, self.conf(''))
        self.assertIn('[placement] auth_type', str(exc))

    def test_password_without_auth_url(self):
        exc = self.assertRaises(
            exception.ConfigError, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = password\nusername = u\n'))
        self.assertIn('auth_url', str(exc))

    def test_admin_token_without_endpoint(self):
        exc = self.assertRaises(
            exception.ConfigError, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = admin_token\n'
                      'token = admin\n'))
        self.assertIn('[placement] endpoint', str(exc))

    def test_unknown_auth_plugin(self):
        exc = self.assertRaises(
            exception.InvalidOption, pclient.PlacementClient,
            self.conf('[placement]\nauth_type = kerberos-ish\n'))
        self.assertIn('auth_type', str(exc))

    def test_admin_token_and_password_load(self):
        c = pclient.PlacementClient(self.conf(
            '[placement]\nauth_type = admin_token\n'
            'endpoint = http://127.0.0.1:1/placement\ntoken = admin\n'))
        self.assertEqual('http://127.0.0.1:1/placement', c.endpoint)
        pclient.PlacementClient(self.conf(
            '[placement]\nauth_type = password\n'
            'auth_url = http://keystone/identity\nusername = nova\n'
            'password = p\nproject_name = service\n'
            'user_domain_name = Default\nproject_domain_name = Default\n'))

    def test_microversions(self):
        for name in dir(pclient):
            if name.endswith('_VERSION'):
                major, minor = getattr(pclient, name).split('.')
                self.assertGreaterEqual((int(major), int(minor)), (1, 36))

    def test_bad_reserved_gpus(self):
        conf = self.conf('[agent]\nmode = inventory\n'
                         'reserved_gpus = 0000:3b:00.0,gpu-seven\n'
                         '[placement]\nauth_type = admin_token\n'
                         'endpoint = http://127.0.0.1:1/placement\n'
                         'token = admin\n')
        exc = self.assertRaises(exception.InvalidOption, preporter.Reporter,
                                conf, pclient.PlacementClient(conf))
        self.assertIn('reserved_gpus', str(exc))
        self.assertIn('gpu-seven', str(exc))

    def test_reserved_gpus_any_spelling(self):
        self.assertEqual({'0000:3b:00.0', '0000:86:00.0'},
                         preporter.parse_reserved_gpus(
                             ['00000000:3B:00.0', '86:00.0']))


class _Handler(http.server.BaseHTTPRequestHandler):
    """Answers each request with the next of ``server.answers``."""

    def do_GET(self):
        server = self.server
        server.seen.append(self.path)
        status, body = (server.answers.pop(0) if server.answers
                        else (200, b'{"ok": true}'))
        self.send_response(status)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class LocalServer(fixtures.Fixture):
    """A real HTTP server on loopback; ``silent``: accepts, never answers."""

    def __init__(self, silent=False):
        super().__init__()
        self.silent = silent

    def _setUp(self):
        if self.silent:
            self.sock = socket.socket()
            self.sock.bind(('127.0.0.1', 0))
            self.sock.listen(8)
            self.addCleanup(self.sock.close)
            self.accepted = []
            port = self.sock.getsockname()[1]
            thread = threading.Thread(target=self._accept, daemon=True)
        else:
            self.server = http.server.ThreadingHTTPServer(
                ('127.0.0.1', 0), _Handler)
            self.server.answers = []
            self.server.seen = []
            self.addCleanup(self.server.server_close)
            self.addCleanup(self.server.shutdown)
            port = self.server.server_address[1]
            thread = threading.Thread(target=self.server.serve_forever,
                                      daemon=True)
        thread.start()
        self.endpoint = 'http://127.0.0.1:%d/placement' % port

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)
            self.addCleanup(conn.close)


class TestRetries(ConfTestCase):
    """keystoneauth's retries, as the [placement] options set them."""

    def client(self, endpoint, extra=''):
        return pclient.PlacementClient(self.conf(
            '[placement]\nauth_type = admin_token\ntoken = admin\n'
            'endpoint = %s\nretry_backoff = 0\n%s' % (endpoint, extra)))

    def test_5xx_retried_max_request_retries_times(self):
        fixture = self.useFixture(LocalServer())
        fixture.server.answers = [(502, b'bad gateway'), (500, b'oops'),
                                  (503, b'busy')]
        client = self.client(fixture.endpoint, 'max_request_retries = 3\n')
        self.assertEqual({'ok': True}, client.get('/traits'))
        self.assertEqual(4, len(fixture.server.seen))

    def test_5xx_gives_up_after_the_retries(self):
        fixture = self.useFixture(LocalServer())
        fixture.server.answers = [(500, b'oops')] * 5
        client = self.client(fixture.endpoint, 'max_request_retries = 2\n')
        exc = self.assertRaises(exception.PlacementUnavailable,
                                client.get, '/traits')
        self.assertIn('answered 500', str(exc))
        self.assertEqual(3, len(fixture.server.seen))

    def test_4xx_not_retried(self):
        fixture = self.useFixture(LocalServer())
        fixture.server.answers = [
            (404, b'{"errors": [{"code": "placement.undefined_code", '
                  b'"detail": "no such provider"}]}')]
        client = self.client(fixture.endpoint, 'max_request_retries = 3\n')
        exc = self.assertRaises(exception.PlacementAPIError,
                                client.get, '/resource_providers/x')
        self.assertEqual(404, pclient.error_status(exc))
        self.assertEqual(1, len(fixture.server.seen))

    def test_keystoneauth_options_win(self):
        fixture = self.useFixture(LocalServer())
        fixture.server.answers = [(500, b'oops')] * 5
        client = self.client(fixture.endpoint,
                             'max_request_retries = 3\n'
                             'status_code_retries = 1\n')
        self.assertRaises(exception.PlacementUnavailable,
                          client.get, '/traits')
        self.assertEqual(2, len(fixture.server.seen))
        # only the codes keystoneauth's option names are retried
        fixture.server.seen.clear()
        fixture.server.answers = [(500, b'oops')] * 5
        client = self.client(fixture.endpoint,
                             'max_request_retries = 3\n'
                             'retriable_status_codes = 503\n')
        self.assertRaises(exception.PlacementUnavailable,
                          client.get, '/traits')
        self.assertEqual(1, len(fixture.server.seen))

    def test_retry_arguments(self):
        conf = self.conf('[placement]\nmax_request_retries = 4\n')
        args = pclient.retry_arguments(conf.placement)
        self.assertEqual(4, args['connect_retries'])
        self.assertEqual(4, args['status_code_retries'])
        # unset: keystoneauth's exponential backoff
        self.assertIsNone(args['connect_retry_delay'])
        self.assertIsNone(args['status_code_retry_delay'])
        self.assertEqual(list(range(500, 600)),
                         args['retriable_status_codes'])
        conf = self.conf('[placement]\nretry_backoff = 2.5\n'
                         'connect_retry_delay = 1\n')
        args = pclient.retry_arguments(conf.placement)
        self.assertEqual(1.0, args['connect_retry_delay'])
        self.assertEqual(2.5, args['status_code_retry_delay'])

    def test_refused_connection_retried(self):
        # a port nothing listens on: bound, never listening
        sock = socket.socket()
        sock.bind(('127.0.0.1', 0))
        self.addCleanup(sock.close)
        endpoint = 'http://127.0.0.1:%d/placement' % sock.getsockname()[1]
        logger = self.useFixture(fixtures.FakeLogger(
            name='keystoneauth.session'))
        client = self.client(endpoint, 'max_request_retries = 2\n')
        self.assertRaises(exception.PlacementUnavailable,
                          client.get, '/traits')
        self.assertEqual(2, logger.output.count('Retrying in'))

    def test_timeout_not_retried(self):
        silent = self.useFixture(LocalServer(silent=True))
        client = self.client(silent.endpoint,
                             'max_request_retries = 3\ntimeout = 0.3\n')
        exc = self.assertRaises(exception.PlacementTimeout,
                                client.get, '/traits')
        self.assertIn('[placement] timeout', str(exc))
        self.assertEqual(1, len(silent.accepted))
