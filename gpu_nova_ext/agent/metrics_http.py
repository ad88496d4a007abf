# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
"""
import concurrent.futures
import selectors
import socket
import threading
import time
from typing import Callable

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

#: largest request head read (request line and headers)
MAX_REQUEST_BYTES = 8192
CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8'
_PATHS = ('/metrics', '/')


class MetricsServer:
    """Serves ``body()`` on ``host:port`` (port 0 picks a free one)."""

    def __init__(self, host: str, port: int, body: Callable[[], bytes],
                 workers: int = 4, idle_timeout: float = 10.0,
                 max_connections: int = 128,
                 clock: Callable[[], float] = time.monotonic):
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
        # socket -> (accepted at, bytes read so far)
        self._pending: dict[socket.socket, tuple[float, bytearray]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True,
                                        name='gpu-metrics-accept')

    @property
    def port(self) -> int:
        return self._listener.getsockname()[1]

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
            oldest = min(self._pending, key=lambda s: self._pending[s][0])
            LOG.debug('Metrics: %d connections pending, dropping the '
                      'oldest', len(self._pending))
            self._drop(oldest)
        sock.setblocking(False)
        self._pending[sock] = (self._clock(), bytearray())
        self._selector.register(sock, selectors.EVENT_READ)

    def _read(self, sock) -> None:
        try:
            data = sock.recv(4096)
        except BlockingIOError:
            return
        except OSError:
            data = b''
        if not data:
            self._drop(sock)
            return
        buf = self._pending[sock][1]
        buf += data
        if b'\r\n\r\n' in buf or b'\n\n' in buf:
            self._selector.unregister(sock)
            del self._pending[sock]
            self._pool.submit(self._answer, sock, bytes(buf))
        elif len(buf) > MAX_REQUEST_BYTES:
            self._drop(sock)

    def _expire(self) -> None:
        deadline = self._clock() - self.idle_timeout
        for sock in [s for s, (at, _b) in self._pending.items()
                     if at <= deadline]:
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


def _reply(status: str, body: bytes, ctype: str = 'text/plain',
           head: bool = False) -> bytes:
    head_text = ('HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n'
                 'Connection: close\r\n\r\n' % (status, ctype, len(body)))
    return head_text.encode('latin-1') + (b'' if head else body)
