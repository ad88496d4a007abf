# SPDX-License-Identifier: Apache-2.0

"""Issue 16.7: the exporter's HTTP server holds no thread per connection.

Half-open connections used to hold one thread each for ever; now a
connection costs a thread only while its complete request is answered,
and one that does not send its request in time is closed.  Socket
timeouts below only guard against a hang: no assertion is about time.
"""
import concurrent.futures
import socket
import threading
import urllib.error
import urllib.request

from oslo_utils import netutils
import testtools

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.agent import monitor
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base


class ExporterServer(testtools.TestCase):

    def start(self, **kwargs):
        exp = exporter.Exporter('cmp-1', '127.0.0.1', 0, **kwargs)
        exp.update([], 0.01)
        exp.start()
        self.addCleanup(exp.stop)
        return exp

    def connect(self, exp):
        sock = socket.create_connection(('127.0.0.1', exp.port),
                                        timeout=deadline.WAIT_S)
        self.addCleanup(sock.close)
        return sock

    def scrape(self, exp, path='/metrics'):
        url = 'http://127.0.0.1:%d%s' % (exp.port, path)
        with urllib.request.urlopen(url, timeout=deadline.WAIT_S) as resp:
            return resp.status, resp.read()


class TestBoundedServer(ExporterServer):

    def test_half_open_connections_hold_no_thread(self):
        exp = self.start(workers=2, idle_timeout=60)
        before = threading.active_count()
        for _ in range(60):
            self.connect(exp)                 # connected, never sends
        # the scrape queues behind the 60: they were all accepted by now
        status, body = self.scrape(exp)
        self.assertEqual(200, status)
        self.assertIn(b'gpu_nova_ext_samples', body)
        self.assertEqual(60, exp._server.pending())
        # the two workers, at most: no thread per connection
        self.assertLessEqual(threading.active_count(), before + 2)

    def test_idle_and_partial_requests_are_closed(self):
        exp = self.start(idle_timeout=0.2)
        idle = self.connect(exp)
        partial = self.connect(exp)
        partial.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n')
        self.assertEqual(b'', idle.recv(100))        # closed, no answer
        self.assertEqual(b'', partial.recv(100))
        self.assertEqual(0, exp._server.pending())
        self.assertEqual(200, self.scrape(exp)[0])

    def test_oldest_pending_connection_dropped_at_the_limit(self):
        exp = self.start(max_connections=3, idle_timeout=60)
        socks = [self.connect(exp) for _ in range(5)]
        # the scrape itself is a pending connection until its request
        # is read: it evicts the oldest idle one as well
        self.assertEqual(200, self.scrape(exp)[0])
        for sock in socks[:3]:
            self.assertEqual(b'', sock.recv(100))
        self.assertEqual(2, exp._server.pending())

    def test_fifty_parallel_scrapers_all_answered(self):
        exp = self.start(workers=4)
        with concurrent.futures.ThreadPoolExecutor(50) as pool:
            results = list(pool.map(lambda _i: self.scrape(exp), range(50)))
        self.assertEqual({200}, {status for status, _b in results})
        self.assertEqual(1, len({body for _s, body in results}))

    def test_rendered_once_per_sample(self):
        exp = self.start()
        first = exp.body()
        self.assertIs(first, exp.body())
        exp.update([], 0.02)
        self.assertIsNot(first, exp.body())
        self.assertIn(b'gpu_nova_ext_sample_duration_seconds{Hostname='
                      b'"cmp-1"} 0.02', exp.body())

    def test_other_paths_and_methods(self):
        exp = self.start()
        err = self.assertRaises(urllib.error.HTTPError, self.scrape, exp,
                                '/nope')
        self.assertEqual(404, err.code)
        sock = self.connect(exp)
        sock.sendall(b'POST /metrics HTTP/1.0\r\n\r\n')
        self.assertIn(b'405', sock.recv(100))
        sock = self.connect(exp)
        sock.sendall(b'garbage\r\n\r\n')
        self.assertIn(b'400', sock.recv(100))


class TestBindDefault(health_base.MonitorTestCase):

    def test_default_is_the_management_address_not_every_interface(self):
        self.cfg.config(group='agent', prometheus_bind_host=None,
                        prometheus_port=9835)
        self.assertIsNone(self.conf.agent.prometheus_bind_host)
        m = monitor.HealthMonitor(self.conf, self._on_change,
                                  notifier=self.notifier)
        self.assertEqual(netutils.get_my_ipv4(), m.exporter.bind_host)
        self.assertNotEqual('0.0.0.0', m.exporter.bind_host)
        self.assertEqual((4, 10.0, 128),
                         (m.exporter.workers, m.exporter.idle_timeout,
                          m.exporter.max_connections))

    def test_option_default(self):
        conf = health_base.make_conf()
        self.assertIsNone(conf.agent.prometheus_bind_host)
