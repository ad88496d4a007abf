# SPDX-License-Identifier: Apache-2.0

"""A small HTTP server for the Prometheus exporter, bounded in every way.

prometheus-client's ``start_http_server`` gives every connection its own
thread and waits on it for ever: 300 half-open connections held 300
threads.  This server instead

* accepts and reads requests in one thread with a selector, so a
  connection that sends nothing costs a file descriptor, not a thread;
* closes a connection whose request is not complete ``idle_timeout``
  seconds after it was accepted (slow or half-open clients), and the
  oldest pending one when ``max_connections`` are open;
* answers complete requests on a fixed pool of ``workers`` threads,
  writing with the same timeout, then closes the connection;
* renders the exposition once per published sample (``body()`` is called
  by the workers; the exporter caches its output).

Only ``GET`` (and ``HEAD``) of ``/metrics`` and ``/`` are served.

Who may scrape (:class:`Access`, ``[agent] prometheus_tls_*`` and
``prometheus_basic_auth_file``): optionally HTTPS, its handshake done in
the same non-blocking loop (a client that never finishes it is closed
like an idle one), and optionally HTTP basic authentication against an
htpasswd file of bcrypt hashes, the format of ``htpasswd -B`` and of the
``basic_auth_users`` of Prometheus exporters' web configuration, checked
by the workers (bcrypt is slow on purpose: never in the accept loop).
"""
import base64
import binascii
import concurrent.futures
import dataclasses
import os
import selectors
import socket
import ssl
import threading
import time
from typing import Callable

import bcrypt
from oslo_log import log as logging

from gpu_nova_ext import exception

LOG = logging.getLogger(__name__)

#: largest request head read (request line and headers)
MAX_REQUEST_BYTES = 8192
CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
_PATHS = ('/metrics', '/')
REALM = 'gpu-nova-agent'
#: the bcrypt variants htpasswd and Prometheus' tools write
BCRYPT_PREFIXES = ('$2a$', '$2b$', '$2y$')
#: bcrypt reads no more of a password (longer ones are refused)
BCRYPT_MAX_BYTES = 72
#: checked when the user is unknown, so a wrong user name costs the same
#: time as a wrong password (no user enumeration)
_DUMMY_HASH = b'$2b$10$qbBW18lHsT2Ji8K2Qv9GGeVlkP4UH9dXD2kEXXYX/IADt45XU4Hfa'


class Htpasswd:
    """``user:bcrypt-hash`` lines of ``path``, re-read when it changes.

    Blank lines and ``#`` comments are skipped.  A file that cannot be
    read or parsed at start raises :class:`~gpu_nova_ext.exception.
    ConfigError` naming the line; later, the users read last stay in force
    and the problem is logged (a file being rewritten locks nobody out).
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._stamp, self._users = self._read()

    def _read(self) -> tuple[tuple, dict[str, bytes]]:
        fix = ('give one "user:bcrypt-hash" per line (htpasswd -nbB USER '
               'PASSWORD prints one)')
        try:
            stat = os.stat(self.path)
            with open(self.path, encoding='utf-8') as f:
                lines = f.read().splitlines()
        except (OSError, UnicodeDecodeError) as exc:
            raise exception.ConfigError(
                reason='[agent] prometheus_basic_auth_file %s cannot be '
                       'read: %s' % (self.path, exc))
        users = {}
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            user, sep, hashed = line.partition(':')
            if not sep or not user or not hashed.startswith(
                    BCRYPT_PREFIXES):
                raise exception.ConfigError(
                    reason='[agent] prometheus_basic_auth_file %s line %d '
                           'is not "user:bcrypt-hash": %s'
                           % (self.path, number, fix))
            users[user] = hashed.encode('ascii', 'replace')
        if not users:
            raise exception.ConfigError(
                reason='[agent] prometheus_basic_auth_file %s names no '
                       'user: %s' % (self.path, fix))
        return (stat.st_mtime_ns, stat.st_size, stat.st_ino), users

    def _current(self) -> dict[str, bytes]:
        try:
            stat = os.stat(self.path)
            stamp = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        except OSError:
            stamp = None
        with self._lock:
            if stamp != self._stamp:
                try:
                    self._stamp, self._users = self._read()
                    LOG.info('Metrics: re-read %s (%d users)', self.path,
                             len(self._users))
                except exception.ConfigError as exc:
                    self._stamp = stamp
                    LOG.error('Metrics: %s; the users read before stay '
                              'in force', exc)
            return self._users

    def check(self, authorization: str | None) -> bool:
        """Whether an ``Authorization`` header holds a user's password.

        An unknown user costs one bcrypt check too.
        """
        user, password = _basic_credentials(authorization)
        hashed = self._current().get(user) if user is not None else None
        secret = password.encode('utf-8')
        if hashed is None or len(secret) > BCRYPT_MAX_BYTES:
            bcrypt.checkpw(b'', _DUMMY_HASH)
            return False
        try:
            return bcrypt.checkpw(secret, hashed)
        except ValueError:          # a malformed hash in the file
            LOG.error('Metrics: the bcrypt hash of user %s in %s is '
                      'malformed', user, self.path)
            return False


def _basic_credentials(authorization: str | None) -> tuple[str | None, str]:
    """(user, password) of a ``Basic`` header; (None, '') if none."""
    scheme, _sep, token = (authorization or '').strip().partition(' ')
    if scheme.lower() != 'basic':
        return None, ''
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode(
            'utf-8')
    except (binascii.Error, UnicodeDecodeError):
        return None, ''
    user, sep, password = decoded.partition(':')
    return (user, password) if sep else (None, '')


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class Access:
    """Who may scrape and how: HTTPS and basic authentication.

    Each is off when its option is unset.  ``tls_cert_file`` and
    ``tls_key_file`` go together.
    """
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    basic_auth_file: str | None = None

    @classmethod
    def from_conf(cls, conf) -> 'Access':
        """The ``[agent] prometheus_*`` options of ``conf``."""
        agent = conf.agent
        return cls(tls_cert_file=agent.prometheus_tls_cert_file,
                   tls_key_file=agent.prometheus_tls_key_file,
                   basic_auth_file=agent.prometheus_basic_auth_file)

    def tls_context(self) -> ssl.SSLContext | None:
        """The server's TLS context (TLS 1.2 or later); None: plain HTTP.

        :raises: ConfigError naming the options when the pair is
            incomplete or does not load.
        """
        if not (self.tls_cert_file or self.tls_key_file):
            return None
        if not (self.tls_cert_file and self.tls_key_file):
            raise exception.ConfigError(
                reason='[agent] prometheus_tls_cert_file and '
                       'prometheus_tls_key_file go together: set both '
                       '(HTTPS) or neither (HTTP)')
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        try:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        except (OSError, ValueError) as exc:
            raise exception.ConfigError(
                reason='[agent] prometheus_tls_cert_file %s / '
                       'prometheus_tls_key_file %s do not load: %s; give a '
                       'PEM certificate (chain) and its unencrypted key, '
                       'readable by the agent' % (
                           self.tls_cert_file, self.tls_key_file, exc))
        return context

    def htpasswd(self) -> Htpasswd | None:
        """The users who may scrape; None: anyone may."""
        if not self.basic_auth_file:
            return None
        return Htpasswd(self.basic_auth_file)


@dataclasses.dataclass(slots=True)
class _Pending:
    """A connection whose request is not complete yet."""
    accepted_at: float
    data: bytearray = dataclasses.field(default_factory=bytearray)
    #: False while the TLS handshake is not done (plain HTTP: True)
    ready: bool = True


class MetricsServer:
    """Serves ``body()`` on ``host:port`` (port 0 picks a free one).

    :param access: HTTPS and basic authentication (default: neither).
    :raises: ConfigError for an ``access`` that does not load, OSError
        when ``host:port`` cannot be bound.
    """

    def __init__(self, host: str, port: int, body: Callable[[], bytes],
                 workers: int = 4, idle_timeout: float = 10.0,
                 max_connections: int = 128,
                 clock: Callable[[], float] = time.monotonic,
                 access: Access | None = None):
        access = access or Access()
        self._tls = access.tls_context()
        self._htpasswd = access.htpasswd()
        self.body = body
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self._clock = clock
        family = socket.AF_INET6 if ':' in host else socket.AF_INET
        self._listener = socket.socket(family, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self._listener.bind((host, port))
            self._listener.listen(128)
        except OSError:
            self._listener.close()
            raise
        self._listener.setblocking(False)
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=workers, thread_name_prefix='gpu-metrics-http')
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._pending: dict[socket.socket, _Pending] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='gpu-metrics-accept')

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

    @property
    def scheme(self) -> str:
        """``https`` with TLS, else ``http``."""
        return 'https' if self._tls is not None else 'http'

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pool.shutdown(wait=True, cancel_futures=True)
        for sock in list(self._pending):
            self._drop(sock)
        self._selector.close()
        self._listener.close()

    def pending(self) -> int:
        """Connections accepted whose request is not complete yet."""
        return len(self._pending)

    # -- the accept/read loop ----------------------------------------------
    def _loop(self) -> None:
        tick = min(0.5, max(0.01, self.idle_timeout / 4))
        while not self._stop.is_set():
            try:
                events = self._selector.select(tick)
            except OSError:                         # closed under us
                return
            for key, _mask in events:
                if key.fileobj is self._listener:
                    self._accept()
                else:
                    self._read(key.fileobj)
            self._expire()

    def _accept(self) -> None:
        try:
            sock, _addr = self._listener.accept()
        except OSError:
            return
        if len(self._pending) >= self.max_connections:
            oldest = min(self._pending,
                         key=lambda s: self._pending[s].accepted_at)
            LOG.debug('Metrics: %d connections pending, dropping the '
                      'oldest', len(self._pending))
            self._drop(oldest)
        sock.setblocking(False)
        pending = _Pending(accepted_at=self._clock())
        if self._tls is not None:
            try:
                sock = self._tls.wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False)
            except OSError:
                sock.close()
                return
            pending.ready = False
        self._pending[sock] = pending
        self._selector.register(sock, selectors.EVENT_READ)

    def _handshake(self, sock) -> bool:
        """Go on with the TLS handshake; True once it is done."""
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._selector.modify(sock, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._selector.modify(sock,
                                  selectors.EVENT_READ | selectors.EVENT_WRITE)
            return False
        except OSError as exc:               # ssl.SSLError included
            LOG.debug('Metrics: TLS handshake failed: %s', exc)
            self._drop(sock)
            return False
        self._selector.modify(sock, selectors.EVENT_READ)
        self._pending[sock].ready = True
        return True

    def _read(self, sock) -> None:
        pending = self._pending[sock]
        if not pending.ready and not self._handshake(sock):
            return
        try:
            data = sock.recv(4096)
            # TLS: what is decrypted already does not wake the selector
            while data and getattr(sock, 'pending', lambda: 0)():
                data += sock.recv(4096)
        except (BlockingIOError, ssl.SSLWantReadError,
                ssl.SSLWantWriteError):
            return
        except OSError:
            data = b''
        if not data:
            self._drop(sock)
            return
        buf = pending.data
        buf += data
        if b'\r\n\r\n' in buf or b'\n\n' in buf:
            self._selector.unregister(sock)
            del self._pending[sock]
            self._pool.submit(self._answer, sock, bytes(buf))
        elif len(buf) > MAX_REQUEST_BYTES:
            self._drop(sock)

    def _expire(self) -> None:
        deadline = self._clock() - self.idle_timeout
        for sock in [s for s, p in self._pending.items()
                     if p.accepted_at <= deadline]:
            self._drop(sock)

    def _drop(self, sock) -> None:
        self._pending.pop(sock, None)
        try:
            self._selector.unregister(sock)
        except (KeyError, ValueError, OSError):
            pass
        sock.close()

    # -- a worker -------------------------------------------------------------
    def _answer(self, sock, request: bytes) -> None:
        try:
            sock.setblocking(True)
            sock.settimeout(self.idle_timeout)
            sock.sendall(self._response(request))
        except OSError as exc:
            LOG.debug('Metrics: writing the answer failed: %s', exc)
        finally:
            sock.close()

    def _response(self, request: bytes) -> bytes:
        line = request.split(b'\n', 1)[0].decode('latin-1').split()
        if len(line) != 3 or not line[2].startswith('HTTP/'):
            return _reply('400 Bad Request', b'bad request\n')
        if self._htpasswd is not None and not self._htpasswd.check(
                _header(request, b'authorization')):
            return _reply('401 Unauthorized', b'authentication required\n',
                          extra='WWW-Authenticate: Basic realm="%s", '
                                'charset="UTF-8"\r\n' % REALM)
        method, target = line[0], line[1].split('?', 1)[0]
        if method not in ('GET', 'HEAD'):
            return _reply('405 Method Not Allowed', b'GET only\n')
        if target not in _PATHS:
            return _reply('404 Not Found', b'try /metrics\n')
        try:
            body = self.body()
        except Exception:
            LOG.exception('Metrics: rendering the exposition failed')
            return _reply('500 Internal Server Error', b'render failed\n')
        return _reply('200 OK', body, CONTENT_TYPE, head=method == 'HEAD')


def _header(request: bytes, name: bytes) -> str | None:
    """The value of header ``name`` (lower case) in a request head."""
    for line in request.split(b'\n')[1:]:
        key, sep, value = line.partition(b':')
        if sep and key.strip().lower() == name:
            return value.strip().decode('latin-1')
    return None


def _reply(status: str, body: bytes, ctype: str = 'text/plain',
           head: bool = False, extra: str = '') -> bytes:
    head_text = ('HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n'
                 '%sConnection: close\r\n\r\n'
                 % (status, ctype, len(body), extra))
    return head_text.encode('latin-1') + (b'' if head else body)
