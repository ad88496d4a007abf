# SPDX-License-Identifier: Apache-2.0

"""A cloud of real processes on this machine (``tools/run cloud``).

    python -m gpu_nova_ext_dev.cloud.devcloud start|stop|status [--dir D]
        [--ha]
    python -m gpu_nova_ext_dev.cloud.devcloud restart NAME [--dir D]

``start`` brings up, each as its own process group: a RabbitMQ node of
its own (TLS beside plain AMQP, with a CA made at start; the agents use
the least-privilege account of ``contrib/rabbitmq/gpu-agent-account``
over TLS), a MariaDB server of its own (Nova's, Placement's and
Keystone's databases),
Keystone, Placement, nova-api, Glance and Neutron's API behind
gunicorn (Neutron with ML2 and no agents, :mod:`.neutron_api`),
nova-conductor, nova-scheduler with two forked
workers loading gpu-nova-ext's filters and weighers from nova.conf, two
nova-compute hosts on Nova's fakelibvirt (:mod:`.compute`) and one
gpu-nova-agent per host.  It returns when every service answers, writes a
clouds.yaml (clouds ``admin`` and ``member``) and prints how to use it.
``stop`` ends the process groups whose pid files it wrote, and nothing
else.  ``restart`` stops one host's nova-compute or gpu-nova-agent and
starts it again, as ``systemctl restart`` does on a real host (the
roll-out playbook's upgrade does that).  Everything lives in one state
directory (``.cloud`` at the top of the work tree unless ``--dir`` or
``GPU_NOVA_EXT_CLOUD_DIR`` names another).

``start --ha`` is the clustered control plane (doc/source/cloud.rst,
"Clustered control plane"): three RabbitMQ nodes joined in one cluster,
every transport URL listing all three, the ``[oslo_messaging_rabbit]``
queue options the deployment tools set (:data:`HA_RABBIT_OPTIONS`), and
two nova-scheduler services (hosts :data:`HA_SCHEDULER_HOSTS`) with two
workers each.
"""
import argparse
import concurrent.futures
import contextlib
import fcntl
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import yaml

from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext_dev.cloud import hosts as cloud_hosts
from gpu_nova_ext_dev.cloud import keystone_options

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
DEFAULT_DIR = os.path.join(TOP, '.cloud')
BIN = os.path.dirname(sys.executable)
RABBIT_SERVER = '/usr/lib/rabbitmq/bin/rabbitmq-server'
EPMD = '/usr/bin/epmd'
# rabbitmqctl itself, not /usr/sbin's wrapper (which switches user and
# loses the node's environment)
RABBIT_BIN = os.path.dirname(RABBIT_SERVER)
# the agents' least-privilege account (doc/source/install.rst,
# install-agent-account) and the control exchange it requires
ACCOUNT_SCRIPT = os.path.join(TOP, 'contrib', 'rabbitmq',
                              'gpu-agent-account')
AGENT_RABBIT_USER = 'gpu-agent'
AGENT_EXCHANGE = 'gpu_nova_ext'
# the clustered variant: RabbitMQ nodes and nova-scheduler services
HA_RABBIT_NODES = 3
HA_SCHEDULER_HOSTS = ('controller-1', 'controller-2')
# [oslo_messaging_rabbit] as kolla-ansible 22.2.0 writes it for every Nova
# service (roles/nova*/templates/nova.conf.j2, om_enable_rabbitmq_stream_
# fanout true by default; openstack-ansible's defaults enable the
# first three too): quorum queues for topic queues, for the transient
# (reply and fanout) ones, fanout over one stream queue per topic (which
# needs a prefetch count), and queue names from the queue manager.
# Every process on the bus gets them: the fanout exchange is declared
# durable exactly when rabbit_transient_quorum_queue is set, and two
# declarations that differ are refused by the broker.
HA_RABBIT_OPTIONS = {
    'rabbit_quorum_queue': 'true',
    'rabbit_transient_quorum_queue': 'true',
    'rabbit_stream_fanout': 'true',
    'rabbit_qos_prefetch_count': 50,
    'use_queue_manager': 'true',
}
MARIADBD = '/usr/sbin/mariadbd'
# Nova's three databases, Placement's and Keystone's, on the cloud's
# MariaDB
MARIADB_DATABASES = ('nova_api', 'nova_cell0', 'nova_cell1', 'placement',
                     'keystone')
# sun_path of a unix socket holds 107 bytes and a NUL
SOCKET_PATH_MAX = 107
REGION = 'RegionOne'
# Keystone's registered limits (every project's default) for what Nova
# counts of every server, as devstack's lib/nova registers them with
# unified limits (a class without one: oslo.limit logs an ERROR at each
# boot, and counts it unlimited).  Above anything the tests boot; GPU
# classes get per-project limits from openstack gpu quota.
REGISTERED_LIMITS = {'servers': 100, 'class:VCPU': 400,
                     'class:MEMORY_MB': 409600, 'class:DISK_GB': 4000}
START_TIMEOUT = float(os.environ.get('GPU_NOVA_EXT_CLOUD_TIMEOUT', '240'))
AGENT_INTERVAL = 5.0
#: what a host's drop-in is written with (``gpu-nova-ext nova-conf ARGS``)
#: at start, and again by a driver upgrade (contrib/ansible's
#: ``gpu_driver_nova_conf_args``): no scheduler section on compute hosts
HOST_NOVA_CONF_ARGS = ('--no-scheduler',)
IMAGE_NAME = 'tiny-raw'
# Neutron's API module, loaded as a file (see Starter.neutron)
NEUTRON_API = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           'neutron_api.py')

SCHEDULER_FILTERS = [
    'ComputeFilter', 'ComputeCapabilitiesFilter', 'ImagePropertiesFilter',
    'ServerGroupAntiAffinityFilter', 'ServerGroupAffinityFilter',
    'PciPassthroughFilter']
# what gpu-nova-ext nova-conf enables, in its order
GPU_FILTERS = list(nova_conf.GPU_FILTERS)


class CloudError(Exception):
    """A process of the cloud did not start or answer (named)."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Cloud:
    """The state directory of one cloud and the processes it started."""

    def __init__(self, path: str | None = None) -> None:
        self.dir = os.path.abspath(
            path or os.environ.get('GPU_NOVA_EXT_CLOUD_DIR') or DEFAULT_DIR)
        self.etc = os.path.join(self.dir, 'etc')
        self.data = os.path.join(self.dir, 'data')
        self.logs = os.path.join(self.dir, 'logs')
        self.pids = os.path.join(self.dir, 'pids')
        self.info_file = os.path.join(self.dir, 'cloud.json')
        self.clouds_yaml = os.path.join(self.dir, 'clouds.yaml')
        self.info: dict = {}
        if os.path.exists(self.info_file):
            with open(self.info_file) as f:
                self.info = json.load(f)

    # --- paths and processes -------------------------------------------

    def log(self, name: str) -> str:
        return os.path.join(self.logs, name + '.log')

    def conf(self, name: str) -> str:
        return os.path.join(self.etc, name)

    def host_dir(self, host: str) -> str:
        return os.path.join(self.dir, 'hosts', host)

    def pid(self, name: str) -> int | None:
        try:
            with open(os.path.join(self.pids, name + '.pid')) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def alive(self, name: str) -> bool:
        pid = self.pid(name)
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        # a zombie child of ours (tests) is not alive
        try:
            with open('/proc/%d/stat' % pid) as f:
                return f.read().split(') ', 1)[1][0] != 'Z'
        except OSError:
            return False

    def spawn(self, name: str, argv: list, env: dict | None = None,
              cwd: str | None = None) -> int:
        """Start ``argv`` as process group ``name``; log and pid file."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env['PATH'] = BIN + os.pathsep + full_env.get('PATH', '')
        with open(self.log(name), 'ab') as out:
            proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=full_env, cwd=cwd or self.dir,
                start_new_session=True)
        with open(os.path.join(self.pids, name + '.pid'), 'w') as f:
            f.write('%d\n' % proc.pid)
        return proc.pid

    def run(self, name: str, argv: list, env: dict | None = None) -> None:
        """Run a set-up command to its end; its output goes to its log."""
        full_env = dict(os.environ)
        full_env.update(env or {})
        full_env['PATH'] = BIN + os.pathsep + full_env.get('PATH', '')
        with open(self.log(name), 'ab') as out:
            rc = subprocess.call(argv, stdout=out, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, env=full_env,
                                 cwd=self.dir)
        if rc:
            raise CloudError('%s failed (exit %d): %s; see %s' % (
                name, rc, ' '.join(argv[:3]), self.log(name)))

    def names(self) -> list[str]:
        try:
            return sorted(f[:-4] for f in os.listdir(self.pids)
                          if f.endswith('.pid'))
        except FileNotFoundError:
            return []

    def kill(self, name: str, sig: int = signal.SIGTERM) -> None:
        pid = self.pid(name)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)

    def end(self, names: list[str], grace: float = 15.0) -> None:
        """TERM process groups ``names``; KILL any alive ``grace`` s on."""
        for name in names:
            self.kill(name)
        deadline = time.monotonic() + grace
        for name in names:
            while self._group_alive(name) and time.monotonic() < deadline:
                time.sleep(0.2)
            if self._group_alive(name):
                self.kill(name, signal.SIGKILL)

    def stop(self) -> list[str]:
        """End every process group this cloud started; its names."""
        names = [n for n in self.names() if self.pid(n)]
        self.end(names)
        for name in names:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.pids, name + '.pid'))
        stop_epmd(self)
        if self.info.get('ha'):
            # the queue manager's counters (/dev/shm/<hostname>_<process>_
            # qmanager), which outlive the processes
            prefix = queue_manager_prefix(self.info)
            for entry in os.listdir('/dev/shm'):
                if entry.startswith(prefix) and entry.endswith('_qmanager'):
                    with contextlib.suppress(OSError):
                        os.unlink(os.path.join('/dev/shm', entry))
        return names

    def _group_alive(self, name: str) -> bool:
        pid = self.pid(name)
        if pid is None:
            return False
        try:
            os.killpg(pid, 0)
        except ProcessLookupError:
            return False
        # only zombies left (our own children in tests)?
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                with open('/proc/%s/stat' % entry) as f:
                    fields = f.read().rsplit(') ', 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[2]) == pid and fields[0] != 'Z':
                return True
        return False

    # --- waiting ---------------------------------------------------------

    def wait_for(self, name: str, check, what: str,
                 timeout: float = START_TIMEOUT) -> None:
        """Wait until ``check()`` is true while process ``name`` lives."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if name and not self.alive(name):
                raise CloudError('%s exited before %s; last lines of %s:\n%s'
                                 % (name, what, self.log(name),
                                    self.tail(name)))
            try:
                if check():
                    return
            except Exception as exc:  # noqa: B902 - reported on timeout
                last = exc
            time.sleep(0.5)
        raise CloudError('%s did not %s within %ds (%s); see %s' % (
            name, what, timeout, last, self.log(name)))

    def tail(self, name: str, lines: int = 15) -> str:
        try:
            with open(self.log(name), errors='replace') as f:
                return ''.join(f.readlines()[-lines:])
        except OSError:
            return ''


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500


def tcp_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(('127.0.0.1', port)) == 0


def ini(sections: dict) -> str:
    """oslo.config file text; list values become repeated lines."""
    out = []
    for section, opts in sections.items():
        out.append('[%s]' % section)
        for key, value in opts.items():
            for v in (value if isinstance(value, list) else [value]):
                out.append('%s = %s' % (key, v))
        out.append('')
    return '\n'.join(out)


def parallel(*steps) -> None:
    """Run independent start steps side by side; the first error wins."""
    with concurrent.futures.ThreadPoolExecutor(len(steps)) as pool:
        futures = [pool.submit(step) for step in steps]
        for future in futures:
            future.result()


def auth_section(info: dict, user: str) -> dict:
    """keystoneauth password options for a service user."""
    return {
        'auth_type': 'password',
        'auth_url': info['keystone_url'] + '/v3',
        'www_authenticate_uri': info['keystone_url'] + '/v3',
        'username': user, 'password': info['service_password'],
        'project_name': 'service', 'user_domain_name': 'Default',
        'project_domain_name': 'Default', 'region_name': REGION,
    }


def ks_section(info: dict, user: str) -> dict:
    """[placement]-style options: auth without www_authenticate_uri."""
    opts = auth_section(info, user)
    del opts['www_authenticate_uri']
    return opts


class Starter:
    """Brings the cloud up, one step per service."""

    def __init__(self, cloud: Cloud, ha: bool = False) -> None:
        self.cloud = cloud
        c = cloud
        ports = {k: free_port() for k in (
            'epmd', 'keystone', 'placement', 'nova_api', 'glance',
            'neutron')}
        nodes = rabbit_nodes(HA_RABBIT_NODES if ha else 1)
        agent_password = secrets.token_hex(12)
        self.info = c.info = {
            'dir': c.dir,
            'ha': ha,
            'ports': ports,
            'rabbit_nodes': nodes,
            # one Erlang cookie for every node (and rabbitmqctl)
            'rabbit_cookie': secrets.token_hex(16).upper(),
            'tls_dir': os.path.join(c.data, 'tls'),
            # Nova's services: the broker's default account, plain AMQP
            'transport_url': transport_url(
                nodes, 'guest', 'guest', 'port'),
            # the agents: their own account, over TLS
            'agent_password': agent_password,
            'agent_transport_url': transport_url(
                nodes, AGENT_RABBIT_USER, agent_password, 'tls_port'),
            'schedulers': ['nova-scheduler'] + (
                ['nova-scheduler-2'] if ha else []),
            'keystone_url': 'http://127.0.0.1:%d' % ports['keystone'],
            'placement_url': 'http://127.0.0.1:%d' % ports['placement'],
            'nova_url': 'http://127.0.0.1:%d/v2.1' % ports['nova_api'],
            'glance_url': 'http://127.0.0.1:%d' % ports['glance'],
            'neutron_url': 'http://127.0.0.1:%d' % ports['neutron'],
            'admin_password': secrets.token_hex(8),
            'member_password': secrets.token_hex(8),
            'service_password': secrets.token_hex(8),
            'hosts': list(cloud_hosts.HOSTS),
        }

    def save(self) -> None:
        with open(self.cloud.info_file, 'w') as f:
            json.dump(self.info, f, indent=1)

    def write(self, name: str, text: str) -> str:
        path = self.cloud.conf(name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def start(self) -> None:
        c = self.cloud
        for d in (c.etc, c.data, c.logs, c.pids):
            os.makedirs(d, exist_ok=True)
        self.save()
        # what does not depend on each other starts side by side
        parallel(self.rabbitmq, self.glance, self.neutron,
                 self.mariadb_and_its_services)
        self.nova_services()
        self.computes()
        self.clouds_yaml()
        self.wait_ready()
        self.save()

    def keystone_and_identity(self) -> None:
        self.keystone()
        self.identity()

    def rabbitmq(self) -> None:
        """The node(s), the cluster, the agents' account (over TLS)."""
        c = self.cloud
        make_tls(c)
        parallel(*(lambda n=n: start_rabbitmq(c, n['name'])
                   for n in self.info['rabbit_nodes']))
        if self.info['ha']:
            form_cluster(c)
        create_agent_account(c)

    def mariadb_and_its_services(self) -> None:
        """MariaDB, then Keystone, Placement and Nova's databases."""
        start_mariadb(self.cloud)
        parallel(self.keystone_and_identity, self.placement,
                 self.nova_databases)

    # --- Keystone ------------------------------------------------------

    def keystone(self) -> None:
        c, info = self.cloud, self.info
        data = c.data
        conf = self.write('keystone.conf', ini({
            'DEFAULT': {'use_stderr': 'true'},
            # not SQLite: Keystone's threads and keystone-manage writing
            # at once failed a token request with "database is locked"
            # (a 500 that stopped nova-scheduler's start on a busy machine)
            'database': {'connection': mariadb_url(c, 'keystone')},
            'token': {'provider': 'fernet'},
            'fernet_tokens': {
                'key_repository': os.path.join(data, 'fernet-keys')},
            'fernet_receipts': {
                'key_repository': os.path.join(data, 'fernet-receipts')},
            'credential': {
                'key_repository': os.path.join(data, 'credential-keys')},
            **keystone_options.DEV_OPTIONS,
        }))
        manage = [os.path.join(BIN, 'keystone-manage'), '--config-file',
                  conf]
        c.run('keystone-manage', manage + ['db_sync'])
        for what in ('fernet_setup', 'credential_setup'):
            c.run('keystone-manage', manage + [
                what, '--keystone-user', str(os.getuid()),
                '--keystone-group', str(os.getgid())])
        url = info['keystone_url']
        c.run('keystone-manage', manage + [
            'bootstrap', '--bootstrap-password', info['admin_password'],
            '--bootstrap-admin-url', url, '--bootstrap-public-url', url,
            '--bootstrap-internal-url', url,
            '--bootstrap-region-id', REGION])
        gunicorn(c, 'keystone', 'keystone.wsgi.api:application',
                 info['ports']['keystone'],
                 {'OS_KEYSTONE_CONFIG_FILES': conf})
        c.wait_for('keystone', lambda: http_ok(url + '/v3'), 'answer')

    def identity(self) -> None:
        """Service users, the member project, catalog entries."""
        import openstack
        info = self.info
        conn = openstack.connect(
            auth_url=info['keystone_url'] + '/v3', username='admin',
            password=info['admin_password'], project_name='admin',
            user_domain_name='Default', project_domain_name='Default',
            region_name=REGION)
        ident = conn.identity
        admin_role = ident.find_role('admin')
        member_role = ident.find_role('member')
        # keystone-manage bootstrap makes it; Neutron's token middleware
        # accepts a service token (nova-api sends its own with the user's)
        # only with this role, as devstack grants it
        service_role = ident.find_role('service')
        service = ident.create_project(name='service', domain_id='default')
        for user in ('nova', 'placement', 'glance', 'neutron'):
            u = ident.create_user(name=user, domain_id='default',
                                  password=info['service_password'])
            for role in (admin_role, service_role):
                ident.assign_project_role_to_user(service, u, role)
        member = ident.create_project(name='demo', domain_id='default')
        u = ident.create_user(name='demo', domain_id='default',
                              password=info['member_password'])
        ident.assign_project_role_to_user(member, u, member_role)
        info['member_project_id'] = member.id
        info['admin_project_id'] = ident.find_project('admin').id
        for name, kind, url in (
                ('nova', 'compute', info['nova_url']),
                ('placement', 'placement', info['placement_url']),
                ('glance', 'image', info['glance_url']),
                ('neutron', 'network', info['neutron_url'])):
            svc = ident.create_service(name=name, type=kind)
            for interface in ('public', 'internal', 'admin'):
                ep = ident.create_endpoint(
                    service_id=svc.id, interface=interface, url=url,
                    region_id=REGION)
            info['%s_endpoint_id' % name] = ep.id
        self.unified_limits(ident)
        self.save()

    def unified_limits(self, ident) -> None:
        """Nova counts quota in Keystone's unified limits, as devstack can.

        nova-api and -conductor read limits as the nova user with the
        reader role on the system (oslo.limit, ``[oslo_limit]``), and
        Nova's default ``[quota] unified_limits_resource_strategy =
        require`` refuses every server until ``servers`` has a registered
        limit; a flavor's classes have one too (:data:`REGISTERED_LIMITS`,
        as devstack registers them).  GPU limits per model are
        ``openstack gpu quota``'s (cloud ``admin``: this Keystone lets a
        project admin manage limits, and Placement, which the command also
        reads, takes project-scoped tokens only).
        """
        ident.assign_system_role_to_user(
            ident.find_user('nova'), ident.find_role('reader'), 'all')
        nova = ident.find_service('nova').id
        for name, limit in REGISTERED_LIMITS.items():
            ident.create_registered_limit(
                service_id=nova, region_id=REGION, resource_name=name,
                default_limit=limit)

    # --- Placement -----------------------------------------------------

    def placement(self) -> None:
        c, info = self.cloud, self.info
        pdir = os.path.join(c.etc, 'placement')
        os.makedirs(pdir, exist_ok=True)
        with open(os.path.join(pdir, 'placement.conf'), 'w') as f:
            f.write(ini({
                'DEFAULT': {'use_stderr': 'true'},
                'api': {'auth_strategy': 'keystone'},
                'placement_database': {
                    'connection': mariadb_url(c, 'placement')},
                'keystone_authtoken': auth_section(info, 'placement'),
            }))
        env = {'OS_PLACEMENT_CONFIG_DIR': pdir}
        c.run('placement-manage', [
            os.path.join(BIN, 'placement-manage'), '--config-dir', pdir,
            'db', 'sync'], env)
        gunicorn(c, 'placement', 'placement.wsgi.api:application',
                 info['ports']['placement'], env)
        c.wait_for('placement', lambda: http_ok(info['placement_url']),
                   'answer')

    # --- Glance ----------------------------------------------------------

    def glance(self) -> None:
        c, info = self.cloud, self.info
        gdir = os.path.join(c.etc, 'glance')
        os.makedirs(gdir, exist_ok=True)
        paste = os.path.join(sys.prefix, 'etc', 'glance',
                             'glance-api-paste.ini')
        shutil.copy(paste, os.path.join(gdir, 'glance-api-paste.ini'))
        store = {}
        for name in ('images', 'staging', 'tasks'):
            store[name] = os.path.join(c.data, 'glance', name)
            os.makedirs(store[name], exist_ok=True)
        with open(os.path.join(gdir, 'glance-api.conf'), 'w') as f:
            f.write(ini({
                'DEFAULT': {'use_stderr': 'true',
                            'enabled_backends': 'fs:file',
                            'bind_host': '127.0.0.1',
                            'bind_port': info['ports']['glance'],
                            'workers': 1},
                'database': {
                    'connection': 'sqlite:///%s/glance.db' % c.data},
                'glance_store': {'default_backend': 'fs'},
                'fs': {'filesystem_store_datadir': store['images']},
                'os_glance_staging_store': {
                    'filesystem_store_datadir': store['staging']},
                'os_glance_tasks_store': {
                    'filesystem_store_datadir': store['tasks']},
                'paste_deploy': {
                    'flavor': 'keystone',
                    'config_file': os.path.join(
                        gdir, 'glance-api-paste.ini')},
                'keystone_authtoken': auth_section(info, 'glance'),
                'oslo_policy': {'enforce_new_defaults': 'false'},
            }))
        env = {'OS_GLANCE_CONFIG_DIR': gdir}
        c.run('glance-manage', [
            os.path.join(BIN, 'glance-manage'), '--config-dir', gdir,
            'db_sync'], env)
        gunicorn(c, 'glance', 'glance.wsgi.api:application',
                 info['ports']['glance'], env)
        c.wait_for('glance', lambda: http_ok(info['glance_url']), 'answer')

    # --- Neutron ---------------------------------------------------------

    def neutron(self) -> None:
        """Neutron's API: ML2, no agents, no networks (``--nic none``).

        nova-api asks it for every server's ports and security groups.
        The schema comes from Neutron's models, then is stamped at the
        migrations' heads (:mod:`.neutron_api` says why).
        """
        c, info = self.cloud, self.info
        qdir = os.path.join(c.etc, 'neutron')
        os.makedirs(os.path.join(c.data, 'neutron', 'locks'), exist_ok=True)
        os.makedirs(qdir, exist_ok=True)
        # found beside neutron.conf (api_paste_config is deprecated)
        shutil.copy(os.path.join(sys.prefix, 'etc', 'neutron',
                                 'api-paste.ini'),
                    os.path.join(qdir, 'api-paste.ini'))
        db = 'sqlite:///%s/neutron.db' % c.data
        conf = self.write('neutron/neutron.conf', ini({
            'DEFAULT': {'use_stderr': 'true',
                        'core_plugin': 'ml2', 'service_plugins': '',
                        'auth_strategy': 'keystone',
                        'bind_host': '127.0.0.1',
                        'bind_port': info['ports']['neutron'],
                        # its notifier's bus: the cloud's, never another
                        'transport_url': info['transport_url']},
            'database': {'connection': db},
            'ml2': {'type_drivers': 'flat', 'project_network_types': '',
                    'mechanism_drivers': '', 'extension_drivers': ''},
            'keystone_authtoken': auth_section(info, 'neutron'),
            # port events to Nova, as devstack writes it
            'nova': ks_section(info, 'nova'),
            'oslo_concurrency': {
                'lock_path': os.path.join(c.data, 'neutron', 'locks')},
        }))
        # run as a file, not as gpu_nova_ext_dev.cloud.neutron_api: the
        # tests package forbids eventlet, which Neutron's WSGI code imports
        c.run('neutron-schema', [sys.executable, NEUTRON_API,
                                 'create-schema', db])
        c.run('neutron-db-manage', [
            os.path.join(BIN, 'neutron-db-manage'), '--config-file', conf,
            'stamp', 'heads'])
        gunicorn(c, 'neutron', 'neutron_api:application()',
                 info['ports']['neutron'],
                 {'OS_NEUTRON_CONFIG_DIR': qdir,
                  'OS_NEUTRON_CONFIG_FILES': 'neutron.conf'},
                 pythonpath=os.path.dirname(NEUTRON_API))
        c.wait_for('neutron', lambda: http_ok(info['neutron_url']), 'answer')

    # --- GPU hosts: descriptions, agent files, nova-conf drop-ins --------

    def prepare_host(self, host: str) -> None:
        """Write the host's description once, for both of its sides."""
        c, info = self.cloud, self.info
        files = host_files(self.cloud, host)
        for d in ('dir', 'nova_conf_dir'):
            os.makedirs(files[d], exist_ok=True)
        desc = cloud_hosts.description(host)
        with open(files['desc'], 'w') as f:
            yaml.safe_dump(desc, f)
        with open(files['gpus'], 'w') as f:
            yaml.safe_dump(cloud_hosts.gpu_facts(desc), f)
        # until nova-compute runs and keeps it current (mdevs it creates)
        with open(files['xml'], 'w') as f:
            f.write(cloud_hosts.test_xml(cloud_hosts.pci_info(desc)))
        open(files['drop_in'], 'a').close()
        with open(files['agent_conf'], 'w') as f:
            f.write(ini({
                # the least-privilege account over TLS, which needs an
                # exchange of the agents' own (doc/source/install.rst)
                'DEFAULT': {'host': host,
                            'transport_url': info['agent_transport_url'],
                            'control_exchange': AGENT_EXCHANGE,
                            'use_stderr': 'true'},
                'oslo_messaging_rabbit': agent_rabbit_options(info, host),
                'agent': {
                    'mode': 'annotate',
                    'inventory_sources': 'libvirt,simulated',
                    'libvirt_uri': 'test://' + files['xml'],
                    'simulated_gpus_file': files['gpus'],
                    'nova_config_file': files['drop_in'],
                    'nova_config_dir': files['nova_conf_dir'],
                    'report_interval': AGENT_INTERVAL,
                    'metrics_interval': 1.0,
                    'prometheus_port': 0,
                },
                'placement': ks_section(info, 'placement'),
            }))
        # as an operator does: discover, then nova-conf writes the drop-in
        c.run('nova-conf-' + host, [
            os.path.join(BIN, 'gpu-nova-ext'), '--config-file',
            files['agent_conf'], 'nova-conf', *HOST_NOVA_CONF_ARGS,
            '--output', files['drop_in']])

    def pci_aliases(self) -> list[str]:
        """``[pci] alias`` values of the hosts' drop-ins (for controllers).

        Each once: hosts of one kind write the same alias, and Nova's API
        refuses a name given twice.
        """
        aliases = []
        for host in self.info['hosts']:
            section = None
            with open(host_files(self.cloud, host)['drop_in']) as f:
                for line in f:
                    line = line.strip()
                    if line.startswith('['):
                        section = line
                    elif section == '[pci]' and line.startswith('alias'):
                        alias = line.split('=', 1)[1].strip()
                        if alias not in aliases:
                            aliases.append(alias)
        return aliases

    # --- Nova ------------------------------------------------------------

    def nova_conf(self) -> dict:
        c, info = self.cloud, self.info
        ndir = os.path.join(c.data, 'nova')
        os.makedirs(os.path.join(ndir, 'locks'), exist_ok=True)
        os.makedirs(os.path.join(ndir, 'instances'), exist_ok=True)
        return {
            'DEFAULT': {
                'transport_url': info['transport_url'],
                'state_path': ndir, 'my_ip': '127.0.0.1',
                'use_stderr': 'true', 'compute_driver':
                'libvirt.LibvirtDriver', 'reserved_host_memory_mb': 0,
                # one instances directory for every compute host, as on
                # shared storage (NFS): with the same my_ip everywhere
                # Nova's driver finds it shared (LibvirtDriver.
                # _is_path_shared_with) and a resize or cold migration
                # moves the server's disk files locally, without SSH
                'instances_path': os.path.join(ndir, 'instances'),
                # raw disk files (compute.py's image backend writes them)
                'use_cow_images': 'False',
                # a resize may stay on its host (one vGPU host)
                'allow_resize_to_same_host': 'True',
            },
            'libvirt': {'images_type': 'raw'},
            'api': {'auth_strategy': 'keystone'},
            'wsgi': {'api_paste_config':
                     os.path.join(c.etc, 'nova', 'api-paste.ini')},
            'api_database': {
                'connection': nova_db(c, 'nova_api')},
            'database': {
                'connection': nova_db(c, 'nova_cell1')},
            'keystone_authtoken': auth_section(info, 'nova'),
            'placement': ks_section(info, 'nova'),
            'glance': {'region_name': REGION},
            # nova-api asks Neutron for servers' ports and security groups
            # (devstack's [neutron] section, with the nova service user)
            'neutron': ks_section(info, 'nova'),
            'cinder': {'os_region_name': REGION},
            'oslo_concurrency': {'lock_path': os.path.join(ndir, 'locks')},
            'oslo_messaging_rabbit': rabbit_options(info),
            'scheduler': {'workers': 2,
                          'discover_hosts_in_cells_interval': -1},
            # doc/source/nova-config.rst, as an operator writes it
            'filter_scheduler': {
                'available_filters': [
                    'nova.scheduler.filters.all_filters',
                    'gpu_nova_ext.scheduler.filters.all_filters'],
                'enabled_filters': ','.join(SCHEDULER_FILTERS + GPU_FILTERS),
                'weight_classes': 'nova.scheduler.weights.all_weighers,'
                                  'gpu_nova_ext.scheduler.weighers.'
                                  'all_weighers',
                'pci_in_placement': 'True',
            },
        }

    def nova_databases(self) -> None:
        c, info = self.cloud, self.info
        for host in info['hosts']:
            self.prepare_host(host)
        ndir = os.path.join(c.etc, 'nova')
        os.makedirs(ndir, exist_ok=True)
        shutil.copy(os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini'),
                    os.path.join(ndir, 'api-paste.ini'))
        conf = os.path.join(ndir, 'nova.conf')
        with open(conf, 'w') as f:
            f.write(ini(self.nova_conf()))
        # compute hosts have no database access (no [database] sections)
        compute = self.nova_conf()
        for section in ('api_database', 'database', 'keystone_authtoken'):
            del compute[section]
        with open(os.path.join(ndir, 'compute.conf'), 'w') as f:
            f.write(ini(compute))
        env = nova_env()
        manage = [os.path.join(BIN, 'nova-manage'), '--config-file', conf]
        c.run('nova-manage', manage + ['api_db', 'sync'], env)
        c.run('nova-manage', manage + [
            'cell_v2', 'map_cell0', '--database_connection',
            nova_db(c, 'nova_cell0')], env)
        c.run('nova-manage', manage + [
            'cell_v2', 'create_cell', '--name', 'cell1'], env)
        c.run('nova-manage', manage + ['db', 'sync'], env)

    def nova_services(self) -> None:
        c, info = self.cloud, self.info
        ndir = os.path.join(c.etc, 'nova')
        conf = os.path.join(ndir, 'nova.conf')
        controller = os.path.join(ndir, 'controller.conf')
        with open(controller, 'w') as f:
            f.write(ini(self.controller_conf()))
        env = nova_env()
        gunicorn(c, 'nova-api', 'nova.wsgi.osapi_compute:application',
                 info['ports']['nova_api'], dict(
                     env, OS_NOVA_CONFIG_DIR=ndir,
                     OS_NOVA_CONFIG_FILES='api-paste.ini;nova.conf;'
                                          'controller.conf'))
        c.spawn('nova-conductor', [os.path.join(BIN, 'nova-conductor'),
                                   '--config-file', conf,
                                   '--config-file', controller], env)
        if info['ha']:
            # a controller host of its own for each scheduler service
            for name, host in zip(info['schedulers'], HA_SCHEDULER_HOSTS):
                with open(scheduler_conf(c, name), 'w') as f:
                    f.write(ini({
                        'DEFAULT': {'host': host},
                        'oslo_messaging_rabbit': rabbit_options(info,
                                                                host)}))
        for name in info['schedulers']:
            start_scheduler(c, name=name)

    def controller_conf(self) -> dict:
        """nova-api's, -conductor's and -scheduler's own options.

        The hosts' ``[pci] alias`` (nova-compute has them from its own
        drop-in) and unified limits (written once Keystone has Nova's
        endpoint).
        """
        info = self.info
        limits = ks_section(info, 'nova')
        del limits['project_name'], limits['project_domain_name']
        limits.update(system_scope='all',
                      endpoint_id=info['nova_endpoint_id'])
        return {
            'pci': {'alias': self.pci_aliases()},
            'quota': {'driver': 'nova.quota.UnifiedLimitsDriver'},
            'oslo_limit': limits,
        }

    def computes(self) -> None:
        c, info = self.cloud, self.info
        for host in info['hosts']:
            files = host_files(self.cloud, host)
            with open(files['nova_conf'], 'w') as f:
                # its own state_path: Nova keeps the compute node's UUID
                # there (compute_id)
                f.write(ini({'DEFAULT': {
                    'host': host, 'state_path': files['dir']},
                    'oslo_messaging_rabbit': rabbit_options(info, host)}))
            start_compute(c, host)
        for host in info['hosts']:
            start_agent(c, host)
        c.wait_for('nova-api', lambda: http_ok(info['nova_url']), 'answer')
        conn = admin_connection(info)
        for host in info['hosts']:
            c.wait_for('nova-compute-' + host, lambda: any(
                s.host == host and s.state == 'up'
                for s in conn.compute.services(binary='nova-compute')),
                'report its service up')
        c.run('nova-manage', [
            os.path.join(BIN, 'nova-manage'), '--config-file',
            c.conf('nova/nova.conf'), 'cell_v2', 'discover_hosts',
            '--verbose'], nova_env())

    # --- the user's side -------------------------------------------------

    def clouds_yaml(self) -> None:
        info = self.info
        common = {'auth_url': info['keystone_url'] + '/v3',
                  'user_domain_name': 'Default',
                  'project_domain_name': 'Default'}
        clouds = {'clouds': {
            'admin': {'auth': dict(common, username='admin',
                                   password=info['admin_password'],
                                   project_name='admin'),
                      'region_name': REGION, 'identity_api_version': 3},
            'member': {'auth': dict(common, username='demo',
                                    password=info['member_password'],
                                    project_name='demo'),
                       'region_name': REGION, 'identity_api_version': 3},
        }}
        with open(self.cloud.clouds_yaml, 'w') as f:
            yaml.safe_dump(clouds, f, default_flow_style=False)
        os.chmod(self.cloud.clouds_yaml, 0o600)

    def wait_ready(self) -> None:
        c, info = self.cloud, self.info
        conn = admin_connection(info)
        # the image every server boots
        if not list(conn.image.images(name=IMAGE_NAME)):
            conn.image.create_image(
                name=IMAGE_NAME, data=b'\0' * (1 << 20), disk_format='raw',
                container_format='bare', visibility='public')
        for host in info['hosts']:
            c.wait_for('nova-compute-' + host,
                       lambda: host in {h.name for h in
                                        conn.compute.hypervisors()},
                       'appear as a hypervisor')
            # flavors are checked against what Placement offers
            c.wait_for('nova-compute-' + host,
                       lambda: gpu_providers(conn, host) == len(
                           cloud_hosts.HOSTS[host]['gpus']),
                       'report its %d GPUs as providers in Placement'
                       % len(cloud_hosts.HOSTS[host]['gpus']))
            c.wait_for('gpu-nova-agent-' + host,
                       lambda: agent_reported(conn, host),
                       'report its GPUs to Placement')
        for name in info['schedulers']:
            c.wait_for(name, lambda: len(scheduler_workers(c, name)) == 2,
                       'fork its two workers')


# --- processes that tests restart too ----------------------------------


def nova_db(cloud: Cloud, name: str) -> str:
    """A Nova database, on the cloud's MariaDB.

    Nova's API, conductor and both scheduler workers write to the same
    databases at once; on SQLite, two transactions that both read and then
    write made one of them fail at once with "database is locked" (no lock
    wait helps there), which put servers in ERROR on a loaded machine.
    """
    return mariadb_url(cloud, name)


def instance_disk(cloud: Cloud, server_id: str) -> str:
    """The root disk file of a server (the hosts' shared instances dir)."""
    return os.path.join(cloud.data, 'nova', 'instances', server_id, 'disk')


def nova_env() -> dict:
    # Nova's services on native threads, as Nova 34 runs them by default
    return {'OS_NOVA_DISABLE_EVENTLET_PATCHING': '1'}


def gunicorn(cloud: Cloud, name: str, app: str, port: int,
             env: dict, pythonpath: str | None = None) -> None:
    """Serve a WSGI application with gunicorn (threads, one worker).

    Settings come from a ``gunicorn.conf.py`` in the service's own
    directory, its working directory: the OpenStack applications parse
    ``sys.argv`` with oslo.config, so gunicorn's command line stays bare.
    ``pythonpath``: a directory to import ``app`` from.
    """
    home = os.path.join(cloud.etc, 'gunicorn-' + name)
    os.makedirs(home, exist_ok=True)
    with open(os.path.join(home, 'gunicorn.conf.py'), 'w') as f:
        for key, value in (
                ('wsgi_app', app), ('bind', '127.0.0.1:%d' % port),
                ('workers', 1), ('threads', 4), ('worker_class', 'gthread'),
                ('timeout', 120), ('accesslog', '-'), ('proc_name', name),
                # above the clients' 2 s polling (openstack ... --wait):
                # gunicorn's 2 s default closed connections the client was
                # reusing at that moment ("Connection reset by peer")
                ('keepalive', 75),
                # one control socket per server, not one in $HOME for all
                ('control_socket_disable', True)):
            f.write('%s = %r\n' % (key, value))
        if pythonpath:
            f.write('pythonpath = %r\n' % pythonpath)
    cloud.spawn(name, [os.path.join(BIN, 'gunicorn')], env, cwd=home)


def rabbit_nodes(count: int) -> list[dict]:
    """The cloud's RabbitMQ nodes: process name, node name, ports.

    One node is process ``rabbitmq``; a cluster's are ``rabbitmq-1``...
    Each has its own AMQP, TLS and Erlang distribution port (its node name
    carries its AMQP port, so two clouds' nodes never share a name).
    """
    nodes = []
    for i in range(1, count + 1):
        port = free_port()
        nodes.append({
            'name': 'rabbitmq' if count == 1 else 'rabbitmq-%d' % i,
            'node': 'gne-cloud-%d@localhost' % port,
            'port': port, 'tls_port': free_port(),
            'dist_port': free_port()})
    return nodes


def transport_url(nodes: list[dict], user: str, password: str,
                  port_key: str) -> str:
    """oslo.messaging's URL listing every node (``port`` or ``tls_port``)."""
    return 'rabbit://%s/' % ','.join(
        '%s:%s@127.0.0.1:%d' % (user, password, n[port_key]) for n in nodes)


def rabbit_node(cloud: Cloud, name: str | None = None) -> dict:
    """The node whose process is ``name`` (default: the first)."""
    nodes = cloud.info['rabbit_nodes']
    if name is None:
        return nodes[0]
    for node in nodes:
        if node['name'] == name:
            return node
    raise CloudError('no RabbitMQ node %s in this cloud (it has %s)' % (
        name, ', '.join(n['name'] for n in nodes)))


def make_tls(cloud: Cloud) -> None:
    """A CA of the cloud's own and the brokers' certificate it signs.

    Made at each start (``cryptography``, as the dev cloud's other keys):
    ``ca.pem`` is what the agents verify the brokers against
    (``[oslo_messaging_rabbit] ssl_ca_file``); the certificate names
    127.0.0.1 and localhost, where every node listens.
    """
    import datetime
    import ipaddress

    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives import serialization
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    d = cloud.info['tls_dir']
    os.makedirs(d, mode=0o700, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, issuer, key, sign_key, ca):
        builder = (x509.CertificateBuilder()
                   .subject_name(subject).issuer_name(issuer)
                   .public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=30))
                   .add_extension(x509.BasicConstraints(ca=ca,
                                                        path_length=None),
                                  critical=True))
        if not ca:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address('127.0.0.1')),
                x509.DNSName('localhost')]), critical=False)
        return builder.sign(sign_key, hashes.SHA256())

    def name(cn):
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca = cert(name('gpu-nova-ext dev cloud CA'),
              name('gpu-nova-ext dev cloud CA'), ca_key, ca_key, True)
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    server = cert(name('127.0.0.1'), ca.subject, key, ca_key, False)
    pem = serialization.Encoding.PEM
    for fname, data in (
            ('ca.pem', ca.public_bytes(pem)),
            ('server.pem', server.public_bytes(pem)),
            ('server.key', key.private_bytes(
                pem, serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption()))):
        with open(os.path.join(d, fname), 'wb') as f:
            f.write(data)


def rabbit_env(cloud: Cloud, node: dict | None = None) -> dict:
    """Environment of ``node``'s server and of rabbitmqctl against it."""
    info = cloud.info
    node = node or rabbit_node(cloud)
    d = os.path.join(cloud.data, node['name'])
    os.makedirs(d, exist_ok=True)
    conf = os.path.join(d, 'rabbitmq')
    tls = info['tls_dir']
    with open(conf + '.conf', 'w') as f:
        f.write('listeners.tcp.default = 127.0.0.1:%d\n'
                'listeners.ssl.default = 127.0.0.1:%d\n'
                'ssl_options.cacertfile = %s\n'
                'ssl_options.certfile = %s\n'
                'ssl_options.keyfile = %s\n'
                'ssl_options.verify = verify_peer\n'
                'ssl_options.fail_if_no_peer_cert = false\n'
                'loopback_users = none\n' % (
                    node['port'], node['tls_port'],
                    os.path.join(tls, 'ca.pem'),
                    os.path.join(tls, 'server.pem'),
                    os.path.join(tls, 'server.key')))
        if info.get('ha'):
            # kolla-ansible's and openstack-ansible's choice
            f.write('cluster_partition_handling = pause_minority\n')
    plugins = os.path.join(d, 'enabled_plugins')
    with open(plugins, 'w') as f:
        f.write('[].\n')
    # an empty conf.d: never the system broker's /etc/rabbitmq/conf.d (its
    # TLS listener on 5671 would replace ours)
    confd = os.path.join(d, 'conf.d')
    os.makedirs(confd, exist_ok=True)
    # every node of a cluster, and rabbitmqctl, share one cookie
    cookie = os.path.join(d, '.erlang.cookie')
    with contextlib.suppress(FileNotFoundError):
        os.chmod(cookie, 0o600)
    with open(cookie, 'w') as f:
        f.write(info['rabbit_cookie'])
    os.chmod(cookie, 0o400)
    return {
        # its own node, port, data and cookie: never the shared broker
        'HOME': d,
        'RABBITMQ_NODENAME': node['node'],
        'RABBITMQ_NODE_IP_ADDRESS': '127.0.0.1',
        'RABBITMQ_NODE_PORT': str(node['port']),
        'RABBITMQ_DIST_PORT': str(node['dist_port']),
        'RABBITMQ_CONFIG_FILE': conf,
        'RABBITMQ_CONFIG_FILES': confd,
        'RABBITMQ_ENABLED_PLUGINS_FILE': plugins,
        'RABBITMQ_MNESIA_BASE': os.path.join(d, 'mnesia'),
        'RABBITMQ_LOG_BASE': os.path.join(d, 'log'),
        'RABBITMQ_LOGS': '-',
        # one Erlang port mapper for the cloud's nodes (stop_epmd ends it)
        'ERL_EPMD_PORT': str(info['ports']['epmd']),
        # rabbitmqctl and the account script find these first
        'PATH': RABBIT_BIN + os.pathsep + os.environ.get('PATH', ''),
    }


def start_rabbitmq(cloud: Cloud, name: str | None = None) -> None:
    """Start (or restart) RabbitMQ node ``name`` (default: the first).

    A restarted node of a cluster rejoins it from its own data directory.
    """
    if not os.path.exists(RABBIT_SERVER):
        raise CloudError('rabbitmq-server is not installed (%s): install '
                         'the rabbitmq-server package' % RABBIT_SERVER)
    node = rabbit_node(cloud, name)
    cloud.spawn(node['name'], [RABBIT_SERVER], rabbit_env(cloud, node))
    wait_rabbitmq(cloud, node)


def start_rabbitmq_cluster(cloud: Cloud) -> None:
    """Start every node of a stopped cluster at once.

    Each node waits at boot for the others it knew (Mnesia's table wait)
    before it listens, as after a power cut: started one at a time, the
    first would wait out its retries alone.
    """
    nodes = cloud.info['rabbit_nodes']
    for node in nodes:
        cloud.spawn(node['name'], [RABBIT_SERVER], rabbit_env(cloud, node))
    for node in nodes:
        wait_rabbitmq(cloud, node)


def wait_rabbitmq(cloud: Cloud, node: dict) -> None:
    for port in (node['port'], node['tls_port']):
        cloud.wait_for(node['name'], lambda: tcp_open(port),
                       'listen on %d' % port)


def rabbitmqctl(cloud: Cloud, node: dict, *args: str,
                cookie: str | None = None) -> str:
    """``rabbitmqctl ARGS`` against ``node``; its output.

    ``cookie``: the Erlang cookie to reach it with (default the
    cluster's; a node cut off by :func:`cut_off_rabbitmq` has another).
    """
    env = dict(os.environ)
    env.update(rabbit_env(cloud, node))
    extra = ['--erlang-cookie', cookie] if cookie else []
    proc = subprocess.run(
        [os.path.join(RABBIT_BIN, 'rabbitmqctl'), '-n', node['node']] +
        extra + list(args), env=env, capture_output=True, text=True,
        stdin=subprocess.DEVNULL, timeout=120, cwd=cloud.dir)
    if proc.returncode:
        raise CloudError('rabbitmqctl %s on %s failed (exit %d): %s' % (
            ' '.join(args), node['node'], proc.returncode,
            (proc.stderr or proc.stdout).strip()[-500:]))
    return proc.stdout


# the Erlang cookie of a node cut off from its cluster
CUT_OFF_COOKIE = 'gne_cut_off'


def cut_off_rabbitmq(cloud: Cloud, node: dict) -> None:
    """Cut ``node`` off from the other nodes of its cluster (a partition).

    No firewall is needed: the node takes another Erlang cookie, so that
    the other nodes can no longer connect to it nor it to them, and drops
    its connections to them.  Its clients' connections stay up until
    the partition handling acts (``pause_minority``: the node, alone, stops
    serving them).  Unlike a cable pulled, the others know at once
    instead of after ``net_ticktime`` (60 s).
    """
    rabbitmqctl(cloud, node, 'eval',
                'erlang:set_cookie(node(), %s), '
                '[erlang:disconnect_node(N) || N <- nodes()].'
                % CUT_OFF_COOKIE)


def reconnect_rabbitmq(cloud: Cloud, node: dict) -> None:
    """End :func:`cut_off_rabbitmq`: the node takes the cluster's cookie.

    A node ``pause_minority`` paused then finds the others and starts
    serving again by itself.
    """
    rabbitmqctl(cloud, node, 'eval', "erlang:set_cookie(node(), '%s')."
                % cloud.info['rabbit_cookie'], cookie=CUT_OFF_COOKIE)


def form_cluster(cloud: Cloud) -> None:
    """Join every other node to the first (``rabbitmqctl join_cluster``)."""
    first, *others = cloud.info['rabbit_nodes']

    def join(node):
        rabbitmqctl(cloud, node, 'stop_app')
        rabbitmqctl(cloud, node, 'join_cluster', first['node'])
        rabbitmqctl(cloud, node, 'start_app')
        wait_rabbitmq(cloud, node)

    # one at a time: two nodes joining at once may both ask the first
    for node in others:
        join(node)


def create_agent_account(cloud: Cloud) -> None:
    """The agents' account, by the script operators run (on the cluster)."""
    node = rabbit_node(cloud)
    env = rabbit_env(cloud, node)
    env['GPU_AGENT_RABBIT_PASSWORD'] = cloud.info['agent_password']
    cloud.run('gpu-agent-account', [
        ACCOUNT_SCRIPT, '--exchange', AGENT_EXCHANGE, AGENT_RABBIT_USER],
        env)


def rabbit_options(info: dict, hostname: str | None = None) -> dict:
    """``[oslo_messaging_rabbit]`` of a process (empty on one node).

    ``hostname``: the queue manager's name for the process's host
    (with :data:`HA_RABBIT_OPTIONS`): every process of the cloud runs on
    this one machine, and the queue manager keeps one counter per
    (hostname, process name) in /dev/shm, so each service host needs a
    name of its own (and of its cloud's) or two would build the same reply
    queue names.
    """
    if not info.get('ha'):
        return {}
    opts = dict(HA_RABBIT_OPTIONS)
    opts['hostname'] = queue_manager_prefix(info) + (hostname or 'ctl')
    return opts


def queue_manager_prefix(info: dict) -> str:
    """What the cloud's queue-manager host names (and files) start with."""
    return info['rabbit_nodes'][0]['node'].split('@')[0] + '-'


def agent_rabbit_options(info: dict, host: str) -> dict:
    """The agent's ``[oslo_messaging_rabbit]``: TLS, and the cluster's."""
    opts = rabbit_options(info, host)
    opts.update(ssl='true',
                ssl_ca_file=os.path.join(info['tls_dir'], 'ca.pem'))
    return opts


def stop_epmd(cloud: Cloud) -> None:
    """End the Erlang port mapper our RabbitMQ started on its own port.

    epmd leaves RabbitMQ's process group (it daemonizes), so stopping the
    groups does not end it; it listens on the cloud's own port
    (ERL_EPMD_PORT), so this ends ours and never another broker's.
    """
    port = cloud.info.get('ports', {}).get('epmd')
    if port and os.path.exists(EPMD) and tcp_open(port):
        subprocess.call([EPMD, '-port', str(port), '-kill'],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


# --- MariaDB ---------------------------------------------------------------


def mariadb_socket(cloud: Cloud) -> str:
    return os.path.join(cloud.data, 'mariadb', 'mysqld.sock')


def mariadb_url(cloud: Cloud, name: str) -> str:
    """SQLAlchemy URL of database ``name`` (PyMySQL, the unix socket)."""
    return 'mysql+pymysql://root@localhost/%s?unix_socket=%s&charset=utf8' % (
        name, mariadb_socket(cloud))


def mariadb_connect(cloud: Cloud):
    import pymysql
    return pymysql.connect(unix_socket=mariadb_socket(cloud), user='root',
                           connect_timeout=5)


def start_mariadb(cloud: Cloud) -> None:
    """A MariaDB server of the cloud's own, on a unix socket only.

    No TCP port (``--skip-networking``) and no accounts
    (``--skip-grant-tables``): only who can open the socket in the state
    directory (mode 0700) reaches it.  Commits are flushed to disk once a
    second, not at each commit: a development cloud trades durability for
    speed.  Its log is the process's output (``logs/mariadb.log``).
    """
    if not os.path.exists(MARIADBD):
        raise CloudError('mariadbd is not installed (%s): install the '
                         'mariadb-server-core package' % MARIADBD)
    sock = mariadb_socket(cloud)
    if len(sock.encode()) > SOCKET_PATH_MAX:
        raise CloudError(
            "MariaDB's socket path %s is longer than a unix socket's %d "
            'bytes: use a shorter state directory (--dir or '
            'GPU_NOVA_EXT_CLOUD_DIR)' % (sock, SOCKET_PATH_MAX))
    home = os.path.dirname(sock)
    os.makedirs(os.path.join(home, 'db'), mode=0o700, exist_ok=True)
    os.chmod(home, 0o700)
    argv = [MARIADBD, '--no-defaults',
            '--datadir=' + os.path.join(home, 'db'), '--socket=' + sock,
            '--pid-file=' + os.path.join(home, 'mariadbd.pid'),
            '--skip-networking', '--skip-grant-tables',
            '--innodb-buffer-pool-size=128M',
            '--innodb-flush-log-at-trx-commit=2', '--max-connections=500']
    if os.getuid() == 0:
        # mariadbd refuses to run as root unless told to
        argv.append('--user=root')
    cloud.spawn('mariadb', argv)

    def answers():
        mariadb_connect(cloud).close()
        return True

    cloud.wait_for('mariadb', answers, 'accept connections on ' + sock)
    conn = mariadb_connect(cloud)
    try:
        with conn.cursor() as cur:
            for name in MARIADB_DATABASES:
                cur.execute('CREATE DATABASE IF NOT EXISTS %s '
                            'CHARACTER SET utf8' % name)
    finally:
        conn.close()


def scheduler_conf(cloud: Cloud, name: str) -> str:
    """The own configuration file of scheduler service ``name``."""
    return cloud.conf('nova/%s.conf' % name)


def start_scheduler(cloud: Cloud, extra_conf: str | None = None,
                    name: str = 'nova-scheduler') -> None:
    """nova-scheduler service ``name``; ``extra_conf``: one more file."""
    # --debug: the scheduler's log says which worker (pid) chose what
    argv = [os.path.join(BIN, 'nova-scheduler'), '--config-file',
            cloud.conf('nova/nova.conf'), '--config-file',
            cloud.conf('nova/controller.conf'), '--debug']
    if os.path.exists(scheduler_conf(cloud, name)):
        argv += ['--config-file', scheduler_conf(cloud, name)]
    if extra_conf:
        argv += ['--config-file', extra_conf]
    cloud.spawn(name, argv, nova_env())


def host_files(cloud: Cloud, host: str) -> dict:
    """The files of one GPU host, by what they are."""
    d = cloud.host_dir(host)
    return {k: os.path.join(d, v) for k, v in (
        ('dir', ''), ('desc', 'host.yaml'), ('xml', 'libvirt.xml'),
        ('gpus', 'gpus.yaml'), ('agent_conf', 'gpu-nova-agent.conf'),
        ('drop_in', 'nova-gpus.conf'), ('nova_conf', 'nova-host.conf'),
        ('nova_conf_dir', 'nova.conf.d'))}


def start_compute(cloud: Cloud, host: str) -> None:
    """nova-compute of ``host``, on its nova.conf drop-in as it is now."""
    files = host_files(cloud, host)
    cloud.spawn('nova-compute-' + host, [
        sys.executable, '-m', 'gpu_nova_ext_dev.cloud.compute',
        files['desc'], files['xml'],
        '--config-file', cloud.conf('nova/compute.conf'),
        '--config-file', files['nova_conf'],
        '--config-file', files['drop_in']], nova_env())


def start_agent(cloud: Cloud, host: str) -> None:
    locks = os.path.join(cloud.host_dir(host), 'locks')
    os.makedirs(locks, exist_ok=True)
    cloud.spawn('gpu-nova-agent-' + host, [
        os.path.join(BIN, 'gpu-nova-agent'), '--config-file',
        os.path.join(cloud.host_dir(host), 'gpu-nova-agent.conf')],
        # oslo.messaging's queue manager takes an external lock
        # (oslo.concurrency's lock_path defaults to $OSLO_LOCK_PATH)
        {'OSLO_LOCK_PATH': locks})


#: what ``restart`` starts again, by the start of a process's name
RESTARTABLE = {'nova-compute-': start_compute,
               'gpu-nova-agent-': start_agent}


def restart(cloud: Cloud, name: str) -> None:
    """Stop process group ``name`` (TERM, then KILL) and start it again.

    What a host's service manager does on ``systemctl restart``: for a
    host's nova-compute (which reads its drop-in again) or gpu-nova-agent.
    """
    prefix = next((p for p in RESTARTABLE if name.startswith(p)), None)
    host = name[len(prefix):] if prefix else None
    if host not in cloud.info.get('hosts', ()):
        raise CloudError('%s: no such process to restart; give '
                         'nova-compute-HOST or gpu-nova-agent-HOST with one '
                         'of the hosts %s' % (
                             name, ', '.join(cloud.info.get('hosts', ()))))
    cloud.end([name])
    RESTARTABLE[prefix](cloud, host)


def children(pid: int) -> list[int]:
    """Live child processes of ``pid`` (from /proc: any thread forked)."""
    out = []
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                fields = f.read().rsplit(') ', 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid and fields[0] != 'Z':
            out.append(int(entry))
    return sorted(out)


def scheduler_names(cloud: Cloud) -> list[str]:
    """The cloud's nova-scheduler services (process names)."""
    return cloud.info.get('schedulers', ['nova-scheduler'])


def scheduler_workers(cloud: Cloud, name: str | None = None) -> list[int]:
    """Worker processes (children of the parent) of service ``name``.

    Without ``name``: every scheduler service's workers.
    """
    out = []
    for service in ([name] if name else scheduler_names(cloud)):
        pid = cloud.pid(service)
        if pid and cloud.alive(service):
            out += children(pid)
    return sorted(out)


def admin_connection(info: dict):
    import openstack
    return openstack.connect(
        auth_url=info['keystone_url'] + '/v3', username='admin',
        password=info['admin_password'], project_name='admin',
        user_domain_name='Default', project_domain_name='Default',
        region_name=REGION)


def gpu_providers(conn, host: str) -> int:
    """Providers with inventory below the host's compute node (GPUs)."""
    rps = list(conn.placement.resource_providers(name=host))
    if not rps:
        return 0
    tree = conn.placement.get(
        '/resource_providers?in_tree=%s' % rps[0].id,
        microversion='1.14').json()['resource_providers']
    count = 0
    for rp in tree:
        if rp['uuid'] == rps[0].id:
            continue
        inventories = conn.placement.get(
            '/resource_providers/%s/inventories' % rp['uuid'],
            microversion='1.14').json()['inventories']
        count += bool(inventories)
    return count


def agent_reported(conn, host: str) -> bool:
    """The agent's traits are on the host's compute node provider."""
    rps = list(conn.placement.resource_providers(name=host))
    if not rps:
        return False
    resp = conn.placement.get(
        '/resource_providers/%s/traits' % rps[0].id,
        microversion='1.6')
    return any(t.startswith('CUSTOM_GPU_')
               for t in resp.json().get('traits', ()))


# --- command line --------------------------------------------------------


@contextlib.contextmanager
def locked(cloud: Cloud):
    """One start or stop of a cloud at a time (tests share one)."""
    os.makedirs(cloud.dir, exist_ok=True)
    with open(os.path.join(cloud.dir, '.lock'), 'w') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def running(cloud: Cloud) -> bool:
    """Every process of the cloud is alive (nothing missing)."""
    names = cloud.names()
    return bool(names) and 'nova-scheduler' in names and all(
        cloud.alive(n) for n in names)


def start(cloud: Cloud, ha: bool = False) -> Cloud:
    """Start the cloud unless it runs; stop what is left on failure.

    ``ha``: the clustered variant.  A running cloud of the other kind is
    stopped and started anew.
    """
    if running(cloud) and bool(cloud.info.get('ha')) == ha:
        return Cloud(cloud.dir)
    cloud.stop()
    for sub in ('etc', 'data', 'logs', 'hosts'):
        shutil.rmtree(os.path.join(cloud.dir, sub), ignore_errors=True)
    try:
        Starter(cloud, ha).start()
    except BaseException:
        cloud.stop()
        raise
    return Cloud(cloud.dir)


def use_lines(cloud: Cloud, name: str = 'admin') -> str:
    return ('export OS_CLIENT_CONFIG_FILE=%s\nexport OS_CLOUD=%s'
            % (cloud.clouds_yaml, name))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog='tools/run cloud',
        description='A GPU cloud of real OpenStack processes on this '
                    'machine (fake libvirt hypervisor).')
    parser.add_argument('action',
                        choices=('start', 'stop', 'status', 'restart'))
    parser.add_argument('name', nargs='?',
                        help='restart: the process, nova-compute-HOST or '
                             'gpu-nova-agent-HOST (as status lists them)')
    parser.add_argument('--dir', help='State directory (default: %s)'
                        % DEFAULT_DIR)
    parser.add_argument('--ha', action='store_true',
                        help='start: the clustered control plane (three '
                             'RabbitMQ nodes, quorum queues, two '
                             'nova-scheduler services)')
    args = parser.parse_args(argv)
    cloud = Cloud(args.dir)
    with locked(cloud):
        if args.action == 'start':
            print('==> starting the cloud in %s (logs in %s)'
                  % (cloud.dir, cloud.logs), flush=True)
            try:
                cloud = start(cloud, args.ha)
            except CloudError as exc:
                print('cloud start failed: %s' % exc, file=sys.stderr)
                return 1
            print('The cloud runs (hosts: %s). To use it:\n%s'
                  % (', '.join(cloud.info['hosts']), use_lines(cloud)))
            print('(OS_CLOUD=member is a member of project demo.)')
            return 0
        if args.action == 'restart':
            try:
                restart(cloud, args.name or '')
            except CloudError as exc:
                print('cloud restart failed: %s' % exc, file=sys.stderr)
                return 2
            print('restarted %s' % args.name)
            return 0
        if args.action == 'stop':
            names = cloud.stop()
            print('stopped: %s' % (', '.join(names) or 'nothing was running'))
            return 0
        for name in cloud.names():
            state = 'running' if cloud.alive(name) else 'DEAD'
            print('%-32s %s' % (name, state))
        return 0 if running(cloud) else 1


if __name__ == '__main__':
    sys.exit(main())
