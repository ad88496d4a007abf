# SPDX-License-Identifier: Apache-2.0

"""The clustered control plane (``tools/run cloud start --ha``), end to end.

doc/source/cloud.rst, "Clustered control plane": three RabbitMQ nodes in
one cluster with the deployment tools' quorum and stream queues, two
nova-scheduler services of two workers each, the agents on their
least-privilege account over TLS.  One class, one cloud (as
``test_cloud``); alone::

    .venv/bin/stestr run --concurrency 1 gpu_nova_ext.tests.cloud.test_ha

The fault test prints the seconds it measured (one ``HA recovery`` line
on stderr, and the test's ``recovery`` detail); the docs' numbers come
from it.  Like ``test_cloud`` it asserts recovery, not its speed: the
waits are bounded by the suite's one deadline.
"""
import json
import os
import shutil
import signal
import sys
import tempfile
import time

import testtools

from gpu_nova_ext.tests import deadline
from gpu_nova_ext_dev.cloud import devcloud
from gpu_nova_ext_dev.cloud import fixture
from gpu_nova_ext_dev.cloud import hosts

RECOVERY_WAIT = deadline.WAIT_S
# vGPU servers booted while the node is down
BOOTS_DURING_FAULT = 3


class HaCloudTest(testtools.TestCase):

    cloud = None
    client = None
    start_error = None

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        # GPU_NOVA_EXT_HA_TEST_DIR: run on (and leave running) the
        # clustered cloud there; else a fresh one, stopped after
        cls.own_cloud = not os.environ.get('GPU_NOVA_EXT_HA_TEST_DIR')
        cls.state_dir = (os.environ.get('GPU_NOVA_EXT_HA_TEST_DIR') or
                         tempfile.mkdtemp(prefix='gne-ha-'))
        try:
            cloud = devcloud.Cloud(cls.state_dir)
            with devcloud.locked(cloud):
                cls.cloud = devcloud.start(cloud, ha=True)
        except Exception as exc:  # noqa: B902 - every test reports it
            cls.start_error = 'the clustered cloud did not start: %s' % exc
            return
        cls.client = fixture.CloudClient(cls.cloud)
        try:
            cls.client.make_flavors()
        except Exception as exc:  # noqa: B902 - every test reports it
            cls.start_error = 'the flavors could not be made: %s' % exc

    @classmethod
    def tearDownClass(cls):
        if cls.own_cloud:
            cloud = devcloud.Cloud(cls.state_dir)
            left = cloud.stop()
            for name in left:
                assert not cloud._group_alive(name), name
            if not os.environ.get('GPU_NOVA_EXT_CLOUD_KEEP'):
                shutil.rmtree(cls.state_dir, ignore_errors=True)
        super().tearDownClass()

    def setUp(self):
        super().setUp()
        if self.start_error:
            self.fail(self.start_error)
        self.c = self.client
        self.addDetail('cloud-dir', testtools.content.text_content(
            self.cloud.dir))
        # where a test's time goes, printed when it ends (clean-ups
        # included): a CI step that runs long says which wait it was
        self.phases = [('start', time.monotonic())]
        self.addCleanup(self.print_phases)

    def phase(self, name):
        self.phases.append((name, time.monotonic()))

    def print_phases(self):
        self.phase('clean-up')
        steps = ', '.join('%s %.1f s' % (name, at - self.phases[i][1])
                          for i, (name, at) in enumerate(self.phases[1:]))
        print('HA test %s: %s' % (self._testMethodName, steps),
              file=sys.__stderr__, flush=True)

    # --- what the broker says --------------------------------------------

    def ctl(self, node, *args):
        return devcloud.rabbitmqctl(self.cloud, node, *args)

    def ctl_json(self, node, *args):
        """rabbitmqctl's JSON, of ``node`` (None: any that answers)."""
        args += ('--formatter', 'json')
        return json.loads(self.ctl(node, *args) if node else
                          self.c.broker_ctl(*args))

    def agent_connections(self):
        return self.c.agent_connections()

    def agents_node(self):
        """The node most of the agents' connections are on (TLS port).

        oslo.messaging picks one of the URL's hosts per connection at
        random, so the agents' connections may be spread.
        """
        by_port = {n['tls_port']: n['name']
                   for n in self.cloud.info['rabbit_nodes']}
        names = [by_port[port] for port, _ in self.agent_connections()]
        self.assertTrue(names, 'no connection of the agents\' account')
        return devcloud.rabbit_node(
            self.cloud, max(set(names), key=names.count))

    def wait_running_nodes(self, count, via=None):
        """The cluster's status once it runs ``count`` nodes.

        As ``via`` sees it (default: the first node that answers).
        """
        deadline_at = time.monotonic() + RECOVERY_WAIT
        while time.monotonic() < deadline_at:
            status = self.ctl_json(via, 'cluster_status')
            if len(status['running_nodes']) == count:
                return status
            time.sleep(1)
        self.fail('the cluster did not run %d nodes within %ds: %s' % (
            count, RECOVERY_WAIT, status))

    # --- the control plane as deployed -----------------------------------

    def test_cluster_queues_and_agent_account(self):
        nodes = self.cloud.info['rabbit_nodes']
        # every worker's state listener runs (it starts at a request)
        self.c.wait_until_workers_hold(time.time(), RECOVERY_WAIT)
        self.phase('every worker holds the state')
        status = self.wait_running_nodes(len(nodes))
        self.assertEqual(sorted(n['node'] for n in nodes),
                         sorted(status['running_nodes']))
        # two scheduler services, two workers each
        self.assertEqual(2, len(devcloud.scheduler_names(self.cloud)))
        self.assertEqual(4, len(devcloud.scheduler_workers(self.cloud)))
        # every agent on its own account, over TLS, and on nothing else
        conns = self.agent_connections()
        self.assertTrue(conns)
        self.assertEqual({True}, {ssl for _, ssl in conns}, conns)
        self.assertLessEqual({port for port, _ in conns},
                             {n['tls_port'] for n in nodes})
        # Nova's topic queues are quorum queues, the state channel's
        # fanout one stream per topic (the deployment tools' options)
        types = {q['name']: q['type'] for q in self.ctl_json(
            nodes[0], 'list_queues', 'name', 'type')}
        self.assertEqual('quorum', types.get('scheduler'), types)
        self.assertEqual('stream', types.get('gpu_nova_ext_scheduler_fanout'),
                         types)
        self.assertEqual('quorum', types.get(
            'gpu_nova_ext_agent.' + hosts.VGPU_HOST), types)

    # --- faults ----------------------------------------------------------

    def boot_nowait(self, name):
        conn = self.c.conn
        flavor = conn.compute.find_flavor(fixture.VGPU_FLAVOR,
                                          ignore_missing=False)
        image = conn.image.find_image(devcloud.IMAGE_NAME,
                                      ignore_missing=False)
        return conn.compute.create_server(
            name=name, flavor_id=flavor.id, image_id=image.id,
            networks='none').id

    def test_kill_agents_rabbitmq_node(self):
        """kill -9 of the node the agents use; the others carry on.

        A GPU is unhealthy throughout: no server may land on it, before,
        during or after the fault, and every boot asked for during the
        fault must end ACTIVE.
        """
        c = self.c
        self.addCleanup(c.delete_servers, 'ha-')
        unhealthy = self.unhealthy_gpu()
        victim = self.agents_node()
        killed = time.time()
        self.cloud.kill(victim['name'], signal.SIGKILL)
        self.addCleanup(self.restart_node, victim)
        servers = [self.boot_nowait('ha-during-%d' % i)
                   for i in range(BOOTS_DURING_FAULT)]
        booted = time.time()
        state = c.wait_until_workers_hold(killed, RECOVERY_WAIT)
        self.phase('every worker holds the state again')
        # the agents left the dead node for live ones, still over TLS
        conns = self.agent_connections()
        self.assertTrue(conns)
        self.assertNotIn(victim['tls_port'], {p for p, _ in conns})
        self.assertEqual({True}, {ssl for _, ssl in conns})
        shown = [c.wait_status(s, timeout=RECOVERY_WAIT) for s in servers]
        active = time.time()
        self.phase('boots ACTIVE')
        heard = c.wait_until_computes_heard(killed, RECOVERY_WAIT)
        self.phase('computes heard after the kill')
        # the node comes back (as systemd restarts it) and rejoins
        self.restart_node(victim)
        rejoined = time.time()
        self.phase('node rejoined')
        self.boot_after(shown, 'ha-after', unhealthy)
        line = ('HA recovery, kill -9 of RabbitMQ node %s (the agents\'): '
                'every worker of both schedulers held every host\'s GPU '
                'state after %.1f s; the %d boots asked for during the fault '
                'ACTIVE after %.1f s; every nova-compute heard from after '
                '%.1f s; node back in the cluster after %.1f s' % (
                    victim['name'], state - killed, len(shown) - 1,
                    active - booted, heard - killed, rejoined - killed))
        self.report(line)

    def unhealthy_gpu(self) -> str:
        """One A100 unhealthy, known to every worker; its provider name."""
        c = self.c
        c.wait_until_workers_hold(time.time(), RECOVERY_WAIT)
        self.phase('every worker holds the state')
        sick = hosts.PGPU0
        changed = c.set_health(hosts.VGPU_HOST, sick, 'unhealthy')
        self.addCleanup(c.set_health, hosts.VGPU_HOST, sick, 'healthy')
        c.wait_until_workers_hold(changed + devcloud.AGENT_INTERVAL + 1,
                                  RECOVERY_WAIT)
        self.phase('every worker knows the unhealthy GPU')
        c.wait_until_computes_heard(time.time(), RECOVERY_WAIT)
        self.phase('every nova-compute heard')
        return fixture.pgpu(hosts.VGPU_HOST, sick)

    def boot_after(self, shown, name, unhealthy):
        """One boot after the fault; every server of ``shown`` checked."""
        shown.append(self.c.wait_status(self.boot_nowait(name),
                                        timeout=RECOVERY_WAIT))
        self.phase('boot after ACTIVE')
        self.assert_all_active_and_healthy(shown, unhealthy)

    def report(self, line):
        """The recovery line: the test's detail, and on stderr."""
        self.addDetail('recovery', testtools.content.text_content(line))
        print(line, file=sys.__stderr__, flush=True)

    def assert_all_active_and_healthy(self, shown, unhealthy):
        for server in shown:
            if server['status'] != 'ACTIVE':
                self.fail('server %s is %s (task state %s), not ACTIVE\n%s' % (
                    server['name'], server['status'],
                    server.get('OS-EXT-STS:task_state'),
                    self.c.trail(server['id'])))
            self.assertNotIn(unhealthy, self.c.gpu_providers(server['id']),
                             '%s landed on the unhealthy GPU' % server['name'])

    def test_kill_scheduler_service(self):
        """kill -9 of one scheduler service; the other schedules meanwhile.

        Its parent and both workers at once.  Boots asked for while it is
        down are placed by the other service's workers (Nova's scheduler
        topic queue is shared); restarted, as systemd does, its new
        workers fill their caches from the agents' casts.
        """
        c = self.c
        self.addCleanup(c.delete_servers, 'ha-sched-')
        unhealthy = self.unhealthy_gpu()
        victim, survivor = devcloud.scheduler_names(self.cloud)
        killed = time.time()
        self.cloud.kill(victim, signal.SIGKILL)
        servers = [self.boot_nowait('ha-sched-during-%d' % i)
                   for i in range(BOOTS_DURING_FAULT)]
        shown = [c.wait_status(s, timeout=RECOVERY_WAIT) for s in servers]
        self.assert_all_active_and_healthy(shown, unhealthy)
        survivors = set(devcloud.scheduler_workers(self.cloud, survivor))
        by = c.scheduled_by()
        self.assertLessEqual({by.get(s) for s in servers}, survivors)
        self.phase('boots during the fault ACTIVE')
        devcloud.start_scheduler(self.cloud, name=victim)
        restarted = time.time()
        self.phase('scheduler restarted')
        state = c.wait_until_workers_hold(restarted, RECOVERY_WAIT)
        self.phase('every worker holds the state again')
        line = ('HA recovery, kill -9 of %s (parent and workers): the %d '
                'boots asked for meanwhile ACTIVE through %s; after its '
                'restart every worker of both held every host\'s GPU state '
                'after %.1f s (%.1f s after the kill)' % (
                    victim, len(servers), survivor, state - restarted,
                    state - killed))
        self.report(line)

    def test_partition_agents_rabbitmq_node(self):
        """The node the agents use cut off from the other two, then back.

        A partition (``devcloud.cut_off_rabbitmq``): the node's Erlang
        distribution to the others is cut while its process and its
        clients' connections run.  ``pause_minority`` pauses it (it is
        alone): it stops serving, its clients move to the two nodes of
        the majority, which carry on.  Healed, it finds them and serves
        again by itself.  No server lands on the unhealthy GPU and every
        boot ends ACTIVE, during and after.
        """
        c = self.c
        self.addCleanup(c.delete_servers, 'ha-cut-')
        unhealthy = self.unhealthy_gpu()
        nodes = self.cloud.info['rabbit_nodes']
        victim = self.agents_node()
        majority = [n for n in nodes if n['name'] != victim['name']]
        cut = time.time()
        devcloud.cut_off_rabbitmq(self.cloud, victim)
        healed = []

        def heal():
            if not healed:
                devcloud.reconnect_rabbitmq(self.cloud, victim)
                healed.append(time.time())
        self.addCleanup(heal)
        # the majority runs without it; it serves nobody (paused)
        self.wait_running_nodes(len(majority), via=majority[0])
        self.phase('the majority runs without the node')
        servers = [self.boot_nowait('ha-cut-during-%d' % i)
                   for i in range(BOOTS_DURING_FAULT)]
        booted = time.time()
        try:
            state = c.wait_until_workers_hold(cut, RECOVERY_WAIT)
        except AssertionError as exc:
            self.fail('%s\n%s' % (exc, self.state_channel_report()))
        self.phase('every worker holds the state again')
        conns = self.agent_connections()
        self.assertTrue(conns)
        self.assertNotIn(victim['tls_port'], {p for p, _ in conns})
        shown = [c.wait_status(s, timeout=RECOVERY_WAIT) for s in servers]
        active = time.time()
        self.phase('boots ACTIVE')
        heard = c.wait_until_computes_heard(cut, RECOVERY_WAIT)
        self.phase('computes heard after the cut')
        heal()
        self.wait_running_nodes(len(nodes), via=majority[0])
        rejoined = time.time()
        self.phase('node serves again')
        status = self.ctl_json(victim, 'cluster_status')
        self.assertEqual(len(nodes), len(status['running_nodes']), status)
        self.assertEqual({}, status.get('partitions') or {}, status)
        self.boot_after(shown, 'ha-cut-after', unhealthy)
        line = ('HA recovery, RabbitMQ node %s (the agents\') cut off from '
                'the other two: every worker of both schedulers held every '
                'host\'s GPU state after %.1f s; the %d boots asked for '
                'during the partition ACTIVE after %.1f s; every '
                'nova-compute heard from after %.1f s; healed, the node '
                'served again after %.1f s' % (
                    victim['name'], state - cut, len(shown) - 1,
                    active - booted, heard - cut, rejoined - healed[0]))
        self.report(line)

    def test_restart_whole_cluster(self):
        """Every RabbitMQ node killed at once, then all started again.

        A power cut of the control plane's brokers: kill -9 of the three
        nodes, every one dead before any starts, then the three started
        together from their own data directories, as systemd does on each
        controller.  Nothing else is restarted: the agents, the scheduler
        workers and nova-compute reconnect on their own.  Boots are asked
        for once every node runs (with no broker, nova-api cannot take
        one: its cast has nowhere to go); they end ACTIVE, none on the
        unhealthy GPU.
        """
        c = self.c
        self.addCleanup(c.delete_servers, 'ha-all-')
        unhealthy = self.unhealthy_gpu()
        nodes = self.cloud.info['rabbit_nodes']
        killed = time.time()
        for node in nodes:
            self.cloud.kill(node['name'], signal.SIGKILL)
        self.addCleanup(self.restart_cluster)
        deadline_at = time.monotonic() + RECOVERY_WAIT
        while (any(self.cloud._group_alive(n['name']) for n in nodes)
               and time.monotonic() < deadline_at):
            time.sleep(0.2)
        self.phase('every node dead')
        devcloud.start_rabbitmq_cluster(self.cloud)
        self.wait_running_nodes(len(nodes))
        running = time.time()
        self.phase('the cluster runs again')
        servers = [self.boot_nowait('ha-all-%d' % i)
                   for i in range(BOOTS_DURING_FAULT)]
        try:
            state = c.wait_until_workers_hold(running, RECOVERY_WAIT)
        except AssertionError as exc:
            self.fail('%s\n%s' % (exc, self.state_channel_report()))
        self.phase('every worker holds the state again')
        shown = [c.wait_status(s, timeout=RECOVERY_WAIT) for s in servers]
        active = time.time()
        self.phase('boots ACTIVE')
        heard = c.wait_until_computes_heard(running, RECOVERY_WAIT)
        self.phase('computes heard after the restart')
        self.assert_all_active_and_healthy(shown, unhealthy)
        line = ('HA recovery, the whole RabbitMQ cluster killed and '
                'started again: the three nodes ran again %.1f s after the '
                'kill; every worker of both schedulers held every host\'s '
                'GPU state %.1f s after that; the %d boots asked for then '
                'ACTIVE after %.1f s; every nova-compute heard from after '
                '%.1f s' % (running - killed, state - running, len(shown),
                            active - running, heard - running))
        self.report(line)

    def state_channel_report(self) -> str:
        """What the broker and the logs say of the GPU state channel.

        For a failure message (the CI step's clean-up removes the cloud):
        the state channel's queues with their consumers, members and
        leaders, and the last warnings of each agent and scheduler.
        """
        try:
            queues = self.c.broker_ctl('list_queues', 'name', 'type',
                                       'consumers', 'messages', 'leader',
                                       'online')
        except Exception as exc:  # noqa: B902 - a report, never a failure
            queues = 'rabbitmqctl list_queues failed: %s' % exc
        lines = [line for line in queues.splitlines()
                 if 'gpu_nova_ext' in line or line.startswith('name')]
        for name in sorted(os.listdir(self.cloud.logs)):
            if not name.startswith(('gpu-nova-agent-', 'nova-scheduler')):
                continue
            with open(os.path.join(self.cloud.logs, name),
                      errors='replace') as f:
                said = [line.rstrip()[:300] for line in f
                        if ' WARNING ' in line or ' ERROR ' in line]
            lines.append('%s, its last warnings and errors:' % name)
            lines.extend('  ' + line for line in said[-8:])
        return '\n'.join(lines)

    def restart_cluster(self):
        nodes = self.cloud.info['rabbit_nodes']
        if not any(self.cloud.alive(n['name']) for n in nodes):
            devcloud.start_rabbitmq_cluster(self.cloud)
        for node in nodes:
            self.restart_node(node)

    def restart_node(self, node):
        if not self.cloud.alive(node['name']):
            devcloud.start_rabbitmq(self.cloud, node['name'])
        self.wait_running_nodes(len(self.cloud.info['rabbit_nodes']))
