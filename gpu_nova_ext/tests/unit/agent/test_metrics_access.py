# SPDX-License-Identifier: Apache-2.0

"""Issue 42: the exporter over HTTPS and with basic authentication.

A real server on loopback, a real HTTP client (urllib), a CA and a
certificate made here with ``cryptography``, and bcrypt hashes as
``htpasswd -B`` writes them.
"""
import base64
import datetime
import http.client
import ipaddress
import os
import socket
import ssl
import tempfile
import urllib.error
import urllib.request

import bcrypt
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import serialization
from cryptography import x509
from cryptography.x509.oid import NameOID
import fixtures
import testtools

from gpu_nova_ext.agent import metrics_http
from gpu_nova_ext import exception
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base

BODY = b'gpu_nova_ext_samples{Hostname="cmp-1"} 1.0\n'


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key):
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_tls(directory):
    """A CA and a certificate for 127.0.0.1 signed by it: their paths."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder()
          .subject_name(_name('test CA')).issuer_name(_name('test CA'))
          .public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None),
                         critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(_name('127.0.0.1')).issuer_name(ca.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address('127.0.0.1'))]),
                critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = {}
    for name, data in (('ca.pem', ca.public_bytes(serialization.Encoding.PEM)),
                       ('cert.pem',
                        cert.public_bytes(serialization.Encoding.PEM)),
                       ('key.pem', _pem_key(key))):
        paths[name] = os.path.join(directory, name)
        with open(paths[name], 'wb') as f:
            f.write(data)
    return paths


def htpasswd_line(user, password):
    # cost 4: the tests' speed; the format is htpasswd -B's
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4))
    return '%s:%s\n' % (user, hashed.decode().replace('$2b$', '$2y$', 1))


class AccessTestCase(testtools.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._dir = tempfile.TemporaryDirectory()
        cls.tls = make_tls(cls._dir.name)

    @classmethod
    def tearDownClass(cls):
        cls._dir.cleanup()
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def auth_file(self, *lines):
        path = os.path.join(self.tmp, 'htpasswd')
        with open(path, 'w') as f:
            f.write(''.join(lines))
        return path

    def serve(self, **access):
        server = metrics_http.MetricsServer(
            '127.0.0.1', 0, lambda: BODY, workers=2, idle_timeout=5.0,
            access=metrics_http.Access(**access))
        server.start()
        self.addCleanup(server.stop)
        return server

    def https(self, **extra):
        return dict(tls_cert_file=self.tls['cert.pem'],
                    tls_key_file=self.tls['key.pem'], **extra)

    def client_context(self, cafile=None):
        return ssl.create_default_context(cafile=cafile or self.tls['ca.pem'])

    def get(self, server, credentials=None, context=None, scheme=None):
        url = '%s://127.0.0.1:%d/metrics' % (scheme or server.scheme,
                                             server.port)
        request = urllib.request.Request(url)
        if credentials:
            token = base64.b64encode(':'.join(credentials).encode())
            request.add_header('Authorization', 'Basic ' + token.decode())
        if url.startswith('https'):
            context = context or self.client_context()
        with urllib.request.urlopen(request, timeout=deadline.WAIT_S,
                                    context=context) as resp:
            return resp.status, resp.read()


class TestTls(AccessTestCase):

    def test_https_handshake_and_scrape(self):
        server = self.serve(**self.https())
        self.assertEqual('https', server.scheme)
        self.assertEqual((200, BODY), self.get(server))

    def test_client_that_does_not_trust_the_ca_fails(self):
        server = self.serve(**self.https())
        other = make_tls(self.tmp)['ca.pem']
        err = self.assertRaises(urllib.error.URLError, self.get, server,
                                context=self.client_context(other))
        self.assertIsInstance(err.reason, ssl.SSLCertVerificationError)
        # the server goes on serving those who trust it
        self.assertEqual(200, self.get(server)[0])

    def test_plain_http_gets_no_metrics(self):
        server = self.serve(**self.https())
        # the server hangs up on what is no TLS handshake
        self.assertRaises((OSError, http.client.HTTPException), self.get,
                          server, scheme='http')
        self.assertEqual(200, self.get(server)[0])

    def test_handshake_never_finished_is_closed(self):
        server = metrics_http.MetricsServer(
            '127.0.0.1', 0, lambda: BODY, idle_timeout=0.2,
            access=metrics_http.Access(**self.https()))
        server.start()
        self.addCleanup(server.stop)
        sock = socket.create_connection(('127.0.0.1', server.port),
                                        timeout=deadline.WAIT_S)
        self.addCleanup(sock.close)
        self.assertEqual(b'', sock.recv(100))   # closed, never answered
        self.assertEqual(0, server.pending())

    def test_half_a_pair_is_one_clear_error(self):
        for half in ({'tls_cert_file': self.tls['cert.pem']},
                     {'tls_key_file': self.tls['key.pem']}):
            err = self.assertRaises(exception.ConfigError,
                                    metrics_http.MetricsServer,
                                    '127.0.0.1', 0, lambda: BODY,
                                    access=metrics_http.Access(**half))
            self.assertIn('prometheus_tls_cert_file and '
                          'prometheus_tls_key_file go together', str(err))
            self.assertNotIn('\n', str(err))

    def test_unloadable_files_named(self):
        err = self.assertRaises(
            exception.ConfigError, metrics_http.Access(
                tls_cert_file=self.tls['ca.pem'],
                tls_key_file=self.tls['key.pem']).tls_context)
        self.assertIn(self.tls['ca.pem'], str(err))


class TestBasicAuth(AccessTestCase):

    def test_401_without_credentials_200_with(self):
        path = self.auth_file('# scrapers\n', '\n',
                              htpasswd_line('prometheus', 's3cret'))
        server = self.serve(**self.https(basic_auth_file=path))
        err = self.assertRaises(urllib.error.HTTPError, self.get, server)
        self.assertEqual(401, err.code)
        self.assertIn('Basic realm="gpu-nova-agent"',
                      err.headers['WWW-Authenticate'])
        for wrong in (('prometheus', 'guess'), ('nobody', 's3cret'),
                      ('prometheus', ''), ('prometheus', 's3cret' * 20)):
            err = self.assertRaises(urllib.error.HTTPError, self.get,
                                    server, credentials=wrong)
            self.assertEqual(401, err.code, wrong)
        self.assertEqual((200, BODY),
                         self.get(server, ('prometheus', 's3cret')))

    def test_plain_http_with_auth(self):
        path = self.auth_file(htpasswd_line('p', 'pw:with:colons'))
        server = self.serve(basic_auth_file=path)
        self.assertEqual('http', server.scheme)
        self.assertEqual(401, self.assertRaises(
            urllib.error.HTTPError, self.get, server).code)
        self.assertEqual(200, self.get(server, ('p', 'pw:with:colons'))[0])

    def test_garbled_headers_refused(self):
        path = self.auth_file(htpasswd_line('p', 'pw'))
        server = self.serve(basic_auth_file=path)
        for value in (b'Basic !!!', b'Bearer cDpwdw==', b'Basic cA==',
                      b'Basic ' + base64.b64encode(b'\xff:\xfe')):
            sock = socket.create_connection(('127.0.0.1', server.port),
                                            timeout=deadline.WAIT_S)
            self.addCleanup(sock.close)
            sock.sendall(b'GET /metrics HTTP/1.0\r\nAuthorization: ' +
                         value + b'\r\n\r\n')
            self.assertIn(b' 401 ', sock.recv(100), value)

    def test_file_reread_when_it_changes(self):
        path = self.auth_file(htpasswd_line('p', 'old'))
        server = self.serve(basic_auth_file=path)
        self.assertEqual(200, self.get(server, ('p', 'old'))[0])
        self.auth_file(htpasswd_line('p', 'new'), htpasswd_line('q', 'q'))
        self.assertEqual(200, self.get(server, ('p', 'new'))[0])
        self.assertEqual(200, self.get(server, ('q', 'q'))[0])
        self.assertEqual(401, self.assertRaises(
            urllib.error.HTTPError, self.get, server, ('p', 'old')).code)
        # a broken rewrite keeps the users read before
        self.auth_file('p:plaintext\n')
        self.assertEqual(200, self.get(server, ('p', 'new'))[0])

    def test_bad_file_is_one_clear_error(self):
        for lines, says in ((('p:plaintext\n',), 'line 1'),
                            (('# nobody\n',), 'names no user'),
                            (('\n', 'justauser\n'), 'line 2')):
            err = self.assertRaises(
                exception.ConfigError, metrics_http.Access(
                    basic_auth_file=self.auth_file(*lines)).htpasswd)
            self.assertIn(says, str(err))
            self.assertIn('htpasswd -nbB', str(err))
        err = self.assertRaises(
            exception.ConfigError, metrics_http.Access(
                basic_auth_file=os.path.join(self.tmp, 'missing')).htpasswd)
        self.assertIn('prometheus_basic_auth_file', str(err))


class TestOptions(health_base.MonitorTestCase):

    def test_off_by_default(self):
        access = metrics_http.Access.from_conf(self.conf)
        self.assertEqual(metrics_http.Access(), access)
        self.assertIsNone(access.tls_context())
        self.assertIsNone(access.htpasswd())

    def test_from_the_agent_options(self):
        self.cfg.config(group='agent', prometheus_tls_cert_file='/c.pem',
                        prometheus_tls_key_file='/k.pem',
                        prometheus_basic_auth_file='/htpasswd')
        self.assertEqual(
            metrics_http.Access(tls_cert_file='/c.pem',
                                tls_key_file='/k.pem',
                                basic_auth_file='/htpasswd'),
            metrics_http.Access.from_conf(self.conf))
