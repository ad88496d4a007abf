# SPDX-License-Identifier: Apache-2.0

"""Shared pieces of the state channel tests over a real RabbitMQ.

The broker is the one ``tools/ensure-rabbitmq`` starts on 127.0.0.1:5672
(``GPU_NOVA_EXT_TEST_TRANSPORT_URL`` points elsewhere).  Each test uses its
own topics, so test classes running at the same time never see each
other's messages.
"""
import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import uuid

import fixtures
from oslo_config import cfg
from oslo_log import log as logging
from oslo_messaging import opts as messaging_opts

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.tests import deadline

TRANSPORT_URL = os.environ.get('GPU_NOVA_EXT_TEST_TRANSPORT_URL',
                               'rabbit://guest:guest@127.0.0.1:5672/')


def broker_address(url: str = TRANSPORT_URL) -> tuple[str, int]:
    parsed = urllib.parse.urlparse(url)
    return parsed.hostname or '127.0.0.1', parsed.port or 5672


def broker_listening(url: str = TRANSPORT_URL) -> bool:
    try:
        with socket.create_connection(broker_address(url), timeout=2):
            return True
    except OSError:
        return False


def broker_connections(url: str = TRANSPORT_URL) -> set[int]:
    """Local ports of this process's open connections to the broker."""
    import psutil       # oslo.utils' dependency

    address = broker_address(url)
    return {c.laddr.port for c in psutil.Process().net_connections('tcp')
            if c.raddr and tuple(c.raddr)[:2] == address
            and c.status == psutil.CONN_ESTABLISHED}


def require_broker(testcase, url: str = TRANSPORT_URL) -> None:
    """Fail (never skip) when no RabbitMQ answers."""
    if not broker_listening(url):
        host, port = broker_address(url)
        testcase.fail(
            'RabbitMQ is not listening on %s:%d (transport URL %s): these '
            'tests need a real broker. Run tools/ensure-rabbitmq (tools/run '
            'tests does), or point GPU_NOVA_EXT_TEST_TRANSPORT_URL at one.'
            % (host, port, url))


def topics() -> dict[str, str]:
    """Per-test exchange and topics (no cross-talk between tests)."""
    tag = uuid.uuid4().hex[:10]
    return {'exchange': 'gne_test_%s' % tag,
            'state_topic': 'gne_test_%s_scheduler' % tag,
            'agent_topic': 'gne_test_%s_agent' % tag}


def make_conf(url: str = TRANSPORT_URL, state_topic: str = None,
              agent_topic: str = None, host: str = None,
              exchange: str = None, **gpu_scheduler) -> cfg.ConfigOpts:
    """A private ConfigOpts for either side of the channel.

    With ``exchange`` (a test's own), its queues and exchanges go away
    with their consumers.
    """
    conf = cfg.ConfigOpts()
    gconf.register_opts(conf)
    logging.register_options(conf)
    for group, opts in messaging_opts.list_opts():
        conf.register_opts(opts, group=group)
    conf([], project='gpu-nova-ext-test', default_config_files=[],
         default_config_dirs=[])
    conf.set_override('transport_url', url)
    if exchange:
        conf.set_override('control_exchange', exchange)
        conf.set_override('amqp_auto_delete', True,
                          group='oslo_messaging_rabbit')
    if host:
        conf.set_override('host', host)
    if state_topic:
        conf.set_override('state_topic', state_topic, group='gpu_scheduler')
        conf.set_override('scheduler_topic', state_topic, group='agent')
    if agent_topic:
        conf.set_override('agent_topic', agent_topic, group='gpu_scheduler')
        conf.set_override('agent_topic', agent_topic, group='agent')
    for name, value in gpu_scheduler.items():
        conf.set_override(name, value, group='gpu_scheduler')
    return conf


def gpu(index: int) -> dict:
    return {
        'pci_address': '0000:%02x:00.0' % (0x3b + index),
        'vfs': [],
        'provider_uuids': [str(uuid.uuid4())],
        'vendor': 'nvidia',
        'model': 'A100_80GB_PCIE',
        'memory_mib': 81920,
        'uuid': 'GPU-%s' % uuid.uuid4(),
        'numa_node': index % 2,
        'mode': 'vgpu',
        'offered_vgpu_type': 'nvidia-471',
        'driver_version': '550.54.15',
        'cuda_cc': '8.0',
        'vgpu_types': [{'id': 'nvidia-471', 'name': 'A100D-10C',
                        'framebuffer_mib': 10240, 'available': 8,
                        'max': 8}],
        'mig': {'capable': True, 'enabled': False},
        'health': {'state': 'healthy', 'reasons': []},
        'metrics': {'utilization_pct': 12.5, 'memory_used_mib': 2048,
                    'temperature_c': 41, 'slowdown_temperature_c': 87,
                    'power_w': 72.4, 'power_limit_w': 300},
    }


def payload(host: str, gpus: int = 8, generated_at: float = None) -> dict:
    """A valid design doc: State protocol payload with ``gpus`` GPUs."""
    return {
        'version': '1.0',
        'host': host,
        'nodename': host + '.example',
        'generated_at': time.time() if generated_at is None
        else generated_at,
        'agent_mode': 'annotate',
        'root_provider_uuid': str(uuid.uuid4()),
        'gpus': [gpu(i) for i in range(gpus)],
    }


def wait_for(predicate, timeout: float | None = None):
    """:func:`gpu_nova_ext.tests.deadline.wait_for`; ``timeout`` is ignored.

    Kept for callers written before every wait ended at the tests' one
    deadline.
    """
    return deadline.wait_for(predicate)


def rabbitmqctl(*args: str) -> None:
    """Run rabbitmqctl (through sudo when not root); raise on failure."""
    exe = shutil.which('rabbitmqctl') or '/usr/sbin/rabbitmqctl'
    if not os.path.exists(exe):
        raise AssertionError(
            'rabbitmqctl is not installed: the broker restart test drives '
            'the local RabbitMQ with it (install rabbitmq-server).')
    cmd = [exe, *args]
    if os.getuid() != 0:
        cmd = ['sudo', '-n', *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True,
                          timeout=deadline.WAIT_S)
    if proc.returncode != 0:
        raise AssertionError('%s failed (exit %d): %s' % (
            ' '.join(cmd), proc.returncode,
            (proc.stderr or proc.stdout).strip()[-500:]))


LOCK_FILE = os.path.join(tempfile.gettempdir(),
                         'gpu-nova-ext-test-rabbitmq.lock')


class BrokerInUse(fixtures.Fixture):
    """Hold the test broker against a restart by another test process.

    Tests that use the shared RabbitMQ take it shared; the broker restart
    test takes it exclusive, so it never pulls the broker from under a
    test running in another stestr worker.
    """

    #: the holder is another test, which may wait for several things
    TIMEOUT = 3 * deadline.WAIT_S

    def __init__(self, exclusive: bool = False):
        super().__init__()
        self.exclusive = exclusive

    def _setUp(self):
        handle = open(LOCK_FILE, 'a')
        self.addCleanup(handle.close)
        mode = fcntl.LOCK_EX if self.exclusive else fcntl.LOCK_SH
        start = time.monotonic()
        while True:
            try:
                fcntl.flock(handle, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() - start >= self.TIMEOUT:
                    raise AssertionError(
                        'Could not lock %s within %ds: another test holds '
                        'the RabbitMQ broker' % (LOCK_FILE, self.TIMEOUT))
                time.sleep(0.01)
        self.addCleanup(fcntl.flock, handle, fcntl.LOCK_UN)
