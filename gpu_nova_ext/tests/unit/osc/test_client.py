# SPDX-License-Identifier: Apache-2.0

"""check_microversion: keystoneauth's endpoint data of a real HTTP server."""
import http.server
import json
import socket
import threading

import fixtures
from keystoneauth1 import adapter as ks_adapter
from keystoneauth1 import session as ks_session
from keystoneauth1 import token_endpoint
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.osc import client


def _root(max_version):
    """Placement's root document (GET /), as Placement writes it."""
    return {'versions': [{
        'id': 'v1.0', 'min_version': '1.0', 'max_version': max_version,
        'status': 'CURRENT', 'links': [{'href': '', 'rel': 'self'}]}]}


class RootServer(fixtures.Fixture):
    """Serves ``document`` as JSON at every path."""

    def __init__(self, document):
        super().__init__()
        self.document = document

    def _setUp(self):
        document = self.document

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = json.dumps(document).encode()
                self.send_response(200)
                self.send_header('Content-Type', 'application/json')
                self.send_header('Content-Length', str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), Handler)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self.endpoint = 'http://127.0.0.1:%d/placement' % (
            server.server_address[1])


def _adapter(endpoint):
    session = ks_session.Session(
        auth=token_endpoint.Token(endpoint, 'admin'))
    return ks_adapter.Adapter(session=session, service_type='placement',
                              endpoint_override=endpoint)


class TestCheckMicroversion(testtools.TestCase):

    def test_new_enough(self):
        server = self.useFixture(RootServer(_root('1.39')))
        self.assertIsNone(client.check_microversion(_adapter(
            server.endpoint)))

    def test_too_old_names_both_versions(self):
        server = self.useFixture(RootServer(_root('1.30')))
        exc = self.assertRaises(exception.PlacementTooOld,
                                client.check_microversion,
                                _adapter(server.endpoint))
        self.assertIn('up to 1.30', str(exc))
        self.assertIn(client.PLACEMENT_MIN_VERSION, str(exc))
        self.assertIn(server.endpoint, str(exc))

    def test_minor_compared_as_a_number(self):
        # 1.100 is newer than 1.36, though not as text
        server = self.useFixture(RootServer(_root('1.100')))
        client.check_microversion(_adapter(server.endpoint))

    def test_not_placement(self):
        server = self.useFixture(RootServer({'hello': 'world'}))
        exc = self.assertRaises(exception.CloudPlacementUnavailable,
                                client.check_microversion,
                                _adapter(server.endpoint))
        self.assertIn(server.endpoint, str(exc))

    def test_nothing_listening(self):
        sock = socket.socket()
        sock.bind(('127.0.0.1', 0))
        self.addCleanup(sock.close)
        endpoint = 'http://127.0.0.1:%d/placement' % sock.getsockname()[1]
        exc = self.assertRaises(exception.CloudPlacementUnavailable,
                                client.check_microversion,
                                _adapter(endpoint))
        self.assertIn(endpoint, str(exc))
