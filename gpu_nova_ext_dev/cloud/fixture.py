# SPDX-License-Identifier: Apache-2.0

"""Driving a running development cloud the way a user does.

``CloudClient`` runs the real ``openstack`` and ``gpu-nova-ext`` commands
as subprocesses against the cloud's clouds.yaml, reads Placement through
openstacksdk to check where servers landed, changes an agent's simulated
GPU facts, and tells from nova-scheduler's log which of its forked workers
holds which host's GPU state (the state cache's ``GPU state of HOST
stored`` DEBUG line, with each worker's pid).
"""
import datetime
import json
import os
import re
import subprocess
import sys
import time

import yaml

from gpu_nova_ext_dev.cloud import devcloud

BIN = os.path.dirname(sys.executable)
COMMAND_TIMEOUT = 180
# nova-scheduler's log: "2026-12-02 00:41:25.123 12345 DEBUG <logger> ..."
_LOG_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) (\d+) \w+ (\S+) .*?'
    r'GPU state of (\S+) stored')
_REQUEST_ID = re.compile(r'req-[0-9a-f-]{36}')
_SCHEDULED = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+) (\d+) .*'
    r'Starting to schedule for instances: \[([^\]]*)\]')


class CommandFailed(Exception):
    pass


def openstack_argv(*args) -> list:
    """The ``openstack`` command line of ARGS, at the tests' microversion."""
    return [os.path.join(BIN, 'openstack'), '--os-compute-api-version',
            '2.90'] + list(args)


def _stamp(text: str) -> float:
    return datetime.datetime.strptime(
        text, '%Y-%m-%d %H:%M:%S.%f').timestamp()


class CloudClient:
    """A user of the cloud: CLI commands and what they can observe."""

    def __init__(self, cloud: devcloud.Cloud) -> None:
        self.cloud = cloud
        self.info = cloud.info
        self._conn = None

    @property
    def conn(self):
        if self._conn is None:
            self._conn = devcloud.admin_connection(self.info)
        return self._conn

    def env(self, cloud_name: str) -> dict:
        env = dict(os.environ)
        env.update(OS_CLIENT_CONFIG_FILE=self.cloud.clouds_yaml,
                   OS_CLOUD=cloud_name,
                   PATH=BIN + os.pathsep + env.get('PATH', ''))
        for key in list(env):
            if key.startswith('OS_') and key not in (
                    'OS_CLIENT_CONFIG_FILE', 'OS_CLOUD'):
                del env[key]
        return env

    def run(self, argv: list, cloud_name: str = 'admin',
            check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            argv, env=self.env(cloud_name), capture_output=True, text=True,
            timeout=COMMAND_TIMEOUT, stdin=subprocess.DEVNULL)
        if check and proc.returncode:
            raise CommandFailed('%s exited %d:\n%s%s' % (
                ' '.join(argv), proc.returncode, proc.stdout, proc.stderr))
        return proc

    def openstack(self, *args, cloud_name: str = 'admin',
                  check: bool = True):
        """``openstack ARGS [-f json]``: the parsed output, if any."""
        argv = openstack_argv(*args)
        # only commands that show something take a format
        if args[1] in ('list', 'show', 'create'):
            argv += ['-f', 'json']
        proc = self.run(argv, cloud_name, check)
        if args[1] not in ('list', 'show', 'create'):
            return None
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    # --- servers ---------------------------------------------------------

    def openstack_json(self, *args, cloud_name: str = 'admin'):
        """``openstack ARGS -f json`` of a command that lists or shows."""
        return json.loads(self.run(openstack_argv(*args, '-f', 'json'),
                                   cloud_name).stdout)

    @staticmethod
    def boot_argv(name: str, flavor: str, wait: bool = True,
                  extra: tuple = ()) -> list:
        """``openstack server create`` of one server, as a user types it.

        ``extra``: more options (``--host HOST``, an admin's).
        """
        return openstack_argv(
            'server', 'create', '--flavor', flavor, '--image',
            devcloud.IMAGE_NAME, '--nic', 'none', '-f', 'json',
            *(['--wait'] if wait else []), *extra, name)

    def boot(self, name: str, flavor: str, cloud_name: str = 'admin',
             wait: bool = True, check: bool = True, extra: tuple = ()):
        proc = self.run(self.boot_argv(name, flavor, wait, extra),
                        cloud_name, check)
        return json.loads(proc.stdout) if proc.stdout.strip() else None

    def show(self, server: str) -> dict:
        return self.openstack('server', 'show', server)

    def wait_status(self, server: str, statuses=('ACTIVE', 'ERROR'),
                    timeout: float = COMMAND_TIMEOUT) -> dict:
        """Poll through openstacksdk, then show it with the CLI."""
        deadline = time.monotonic() + timeout
        while (self.conn.compute.get_server(server).status not in statuses
               and time.monotonic() < deadline):
            time.sleep(1)
        return self.show(server)

    def wait_servers(self, prefix: str, timeout: float = COMMAND_TIMEOUT
                     ) -> list:
        """The servers named ``prefix...`` once none is building.

        One openstacksdk listing a second (not a CLI start per server).
        """
        deadline = time.monotonic() + timeout
        while True:
            servers = list(self.conn.compute.servers(name='^' + prefix))
            if (all(s.status in ('ACTIVE', 'ERROR') for s in servers)
                    or time.monotonic() > deadline):
                return servers
            time.sleep(1)

    @staticmethod
    def host_of(shown: dict) -> str | None:
        return shown.get('OS-EXT-SRV-ATTR:host') or shown.get(
            'compute_host')

    def gpu_providers(self, server_id: str) -> list[str]:
        """Names of the providers the server's GPU allocation is on."""
        allocs = self.conn.placement.get(
            '/allocations/%s' % server_id).json()['allocations']
        names = []
        for rp_uuid, alloc in allocs.items():
            if any(rc in ('VGPU', 'PGPU') or rc.startswith('CUSTOM_')
                   for rc in alloc['resources']):
                names.append(self.conn.placement.get(
                    '/resource_providers/%s' % rp_uuid).json()['name'])
        return names

    def last_migration(self, server_id: str) -> dict:
        """The server's newest migration, as Nova's API shows it."""
        migrations = self.conn.compute.get(
            '/os-migrations?instance_uuid=%s' % server_id,
            microversion='2.80').json()['migrations']
        return max(migrations, key=lambda m: m['id'])

    def delete_images(self, name: str) -> None:
        """Delete the images named ``name`` (backups a test made)."""
        for image in list(self.conn.image.images(name=name)):
            self.conn.image.delete_image(image)

    def delete_servers(self, prefix: str) -> None:
        """Delete every project's servers named ``prefix...``; wait.

        Clean-up, through openstacksdk (no CLI start per call).
        """
        compute = self.conn.compute
        servers = list(compute.servers(all_projects=True,
                                       name='^' + prefix))
        for server in servers:
            compute.delete_server(server)
        for server in servers:
            compute.wait_for_delete(server, wait=COMMAND_TIMEOUT)

    def trail(self, server_id: str) -> str:
        """Where a server's request got to, from the cloud's logs.

        Per log that names the server (or a request id a line naming it
        carries: nova-api's lines name the request, not the server): how
        many lines, and the last.  For a failure message: a boot lost
        between two services shows as the service that never logged it.
        """
        logs = sorted(os.listdir(self.cloud.logs))
        requests = set()
        for name in logs:
            with open(os.path.join(self.cloud.logs, name),
                      errors='replace') as f:
                requests.update(req for line in f if server_id in line
                                for req in _REQUEST_ID.findall(line))
        keys = [server_id] + sorted(requests)
        out = ['logs naming server %s (or one of its %d requests):' % (
            server_id, len(requests))]
        for name in logs:
            with open(os.path.join(self.cloud.logs, name),
                      errors='replace') as f:
                hits = [line for line in f if any(k in line for k in keys)]
            if hits:
                out.append('  %s: %d lines, last: %s' % (
                    name, len(hits), hits[-1].strip()[:400]))
        return '\n'.join(out)

    # --- the agents' simulated GPUs --------------------------------------

    def set_health(self, host: str, address: str, health: str) -> float:
        """Change a GPU's health in the host agent's NVML stand-in."""
        path = os.path.join(self.cloud.host_dir(host), 'gpus.yaml')
        with open(path) as f:
            gpus = yaml.safe_load(f)
        gpus[address]['health'] = health
        tmp = path + '.tmp'
        with open(tmp, 'w') as f:
            yaml.safe_dump(gpus, f)
        os.replace(tmp, path)
        return time.time()

    # --- the broker --------------------------------------------------------

    def broker_ctl(self, *args: str) -> str:
        """``rabbitmqctl ARGS`` on the first node that answers.

        A dead node does not, nor one cut off from the cluster (another
        Erlang cookie) or paused by ``pause_minority``; a cluster-wide
        question (queues, connections) gets the same answer on any other.
        """
        failed = []
        for node in self.info['rabbit_nodes']:
            if not self.cloud.alive(node['name']):
                continue
            try:
                return devcloud.rabbitmqctl(self.cloud, node, *args)
            except devcloud.CloudError as exc:
                failed.append(str(exc))
        raise AssertionError('no RabbitMQ node of the cloud answers: %s' % (
            '; '.join(failed) or 'none runs'))

    def agent_connections(self) -> list[tuple[int, bool]]:
        """(broker port, TLS?) of every connection of the agents' account.

        rabbitmqctl lists the whole cluster's.
        """
        rows = json.loads(self.broker_ctl(
            'list_connections', 'user', 'port', 'ssl', '--formatter', 'json'))
        return [(r['port'], r['ssl']) for r in rows
                if r['user'] == devcloud.AGENT_RABBIT_USER]

    # --- the scheduler's workers -----------------------------------------

    def scheduler_lines(self):
        """Every line of every nova-scheduler service's log."""
        for name in devcloud.scheduler_names(self.cloud):
            with open(self.cloud.log(name), errors='replace') as f:
                yield from f

    def state_log(self) -> list[tuple[float, int, str]]:
        """(time, worker pid, host) of every GPU state a worker stored."""
        out = []
        for line in self.scheduler_lines():
            m = _LOG_LINE.match(line)
            if m:
                out.append((_stamp(m.group(1)), int(m.group(2)),
                            m.group(4)))
        return out

    def scheduled_by(self) -> dict[str, int]:
        """Instance uuid -> pid of the worker that scheduled it."""
        out = {}
        for line in self.scheduler_lines():
            m = _SCHEDULED.match(line)
            if m:
                for uuid in re.findall(r'[0-9a-f-]{36}', m.group(3)):
                    out[uuid] = int(m.group(2))
        return out

    def workers_holding(self, since: float) -> dict[int, set]:
        """Live worker pid -> hosts whose state it stored after ``since``."""
        workers = devcloud.scheduler_workers(self.cloud)
        held: dict[int, set] = {pid: set() for pid in workers}
        for stamp, pid, host in self.state_log():
            if stamp >= since and pid in held:
                held[pid].add(host)
        return held

    def expected_workers(self) -> int:
        """Two workers per nova-scheduler service."""
        return 2 * len(devcloud.scheduler_names(self.cloud))

    def all_workers_hold_all(self, since: float) -> bool:
        held = self.workers_holding(since)
        return len(held) == self.expected_workers() and all(
            hosts >= set(self.info['hosts']) for hosts in held.values())

    # --- flavors, made as an operator makes them -------------------------

    def make_flavors(self) -> None:
        """The tests' flavors; those a cloud already has are kept."""
        have = {f.name for f in self.conn.compute.flavors()}
        small = ['--vcpus', '1', '--ram', '512', '--disk', '1']
        if VGPU_FLAVOR not in have:
            self.openstack('gpu', 'flavor', 'create', VGPU_FLAVOR, '--model',
                           A100, *small)
        # the one to resize VGPU_FLAVOR's servers to: more memory and disk
        if VGPU_LARGE_FLAVOR not in have:
            self.openstack('gpu', 'flavor', 'create', VGPU_LARGE_FLAVOR,
                           '--model', A100, '--vcpus', '1', '--ram', '1024',
                           '--disk', '2')
        if PCI_FLAVOR not in have:
            self.openstack('gpu', 'flavor', 'create', PCI_FLAVOR, '--mode',
                           'passthrough', '--model', 'L4', *small)
        if PCI_X2_FLAVOR not in have:
            self.openstack('gpu', 'flavor', 'create', PCI_X2_FLAVOR, '--mode',
                           'passthrough', '--model', 'L4', '--count', '2',
                           *small)
        # an A100 vGPU flavor that asks for another model: Placement offers
        # the A100 host, GpuModelFilter refuses it
        if IMPOSSIBLE_FLAVOR not in have:
            self.openstack('gpu', 'flavor', 'create', IMPOSSIBLE_FLAVOR,
                           '--model', A100, *small)
            self.openstack('flavor', 'set', '--property', 'gpu:model=L4',
                           IMPOSSIBLE_FLAVOR)

    # --- nova-compute's own heartbeat -------------------------------------

    def computes_heard(self, since: float) -> bool:
        """Every nova-compute is up, with a heartbeat after ``since``."""
        services = list(self.conn.compute.services(binary='nova-compute'))
        return len(services) == len(self.info['hosts']) and all(
            s.state == 'up' and s.updated_at and datetime.datetime
            .fromisoformat(s.updated_at).replace(
                tzinfo=datetime.timezone.utc).timestamp() >= since
            for s in services)

    def wait_until_computes_heard(self, since: float,
                                  timeout: float) -> float:
        """Wait for :meth:`computes_heard`; when (epoch seconds)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.computes_heard(since):
                return time.time()
            time.sleep(0.5)
        raise AssertionError(
            'not every nova-compute reported up after %s within %ds: %s' % (
                time.ctime(since), timeout,
                [(s.host, s.state, s.updated_at) for s in
                 self.conn.compute.services(binary='nova-compute')]))

    # --- waiting for the workers' state, with probes ---------------------

    def probe(self) -> None:
        """One scheduling request (it ends in NoValidHost).

        A worker that has not scheduled since it started starts its state
        listener with it.  Through openstacksdk, not the CLI: probes are
        the test's plumbing, and each CLI start costs seconds of CPU that
        the cloud's recovery needs.
        """
        self._probes = getattr(self, '_probes', 0) + 1
        conn = self.conn
        if not hasattr(self, '_probe_ids'):
            self._probe_ids = (
                conn.compute.find_flavor(IMPOSSIBLE_FLAVOR,
                                         ignore_missing=False).id,
                conn.image.find_image(devcloud.IMAGE_NAME,
                                      ignore_missing=False).id)
        flavor_id, image_id = self._probe_ids
        conn.compute.create_server(
            name='probe-%d' % self._probes, flavor_id=flavor_id,
            image_id=image_id, networks='none')

    def wait_until_workers_hold(self, since: float, timeout: float,
                                probe_every: float = 3.0) -> float:
        """Wait until every worker stored every host's state after ``since``.

        Probes while a worker lacks one; returns when (epoch seconds) that
        was seen; fails after ``timeout``.
        """
        deadline = time.monotonic() + timeout
        last_probe = 0.0
        try:
            while time.monotonic() < deadline:
                if self.all_workers_hold_all(since):
                    return time.time()
                held = self.workers_holding(since)
                if (len(held) < self.expected_workers() or
                        not all(held.values())) and (
                        time.monotonic() - last_probe > probe_every):
                    last_probe = time.monotonic()
                    self.probe()
                time.sleep(0.2)
        finally:
            if getattr(self, '_probes', 0):
                self.delete_servers('probe-')
        raise AssertionError(
            'scheduler workers did not all hold every host\'s GPU state '
            'within %ds: %s; see %s' % (
                timeout, self.workers_holding(since),
                self.cloud.log('nova-scheduler')))


A100 = 'A100_80GB_PCIE'
VGPU_FLAVOR = 'gpu.a100.vgpu'
VGPU_LARGE_FLAVOR = 'gpu.a100.vgpu.large'
PCI_FLAVOR = 'gpu.l4.pci'
PCI_X2_FLAVOR = 'gpu.l4.pci.x2'
IMPOSSIBLE_FLAVOR = 'gpu.a100.as.l4'


def pgpu(host: str, address: str) -> str:
    """Name Nova gives the libvirt pGPU provider of ``address``."""
    return '%s_pci_%s' % (host, address.replace(':', '_').replace('.', '_'))


def pci_rp(host: str, address: str) -> str:
    """Name Nova gives a PCI-in-Placement device provider."""
    return '%s_%s' % (host, address.upper())
