# SPDX-License-Identifier: Apache-2.0

"""A driver roll-out in the dev cloud: the CLI, then contrib/ansible.

Its own class, so its own cloud (:class:`.test_cloud.CloudTestCase`): the
roll-out changes the driver of every L4 host and restarts their
nova-compute, which the other cloud tests' servers and snapshots must not
see.  The operations guide's runbook (doc/source/operations.rst) end to
end: two waves over the two L4 passthrough hosts with a server on each,
one host's upgrade failing (the run stops there, that host drained, the
reason printed), then the same command again finishes it.
"""
import json
import os
import subprocess
import sys

import fixtures
import yaml

from gpu_nova_ext.tests.cloud import test_cloud
from gpu_nova_ext.tests import deadline
from gpu_nova_ext_dev.cloud import devcloud
from gpu_nova_ext_dev.cloud import fixture
from gpu_nova_ext_dev.cloud import hosts

# the driver versions the roll-out test installs, one after the other
# (the cloud's GPUs start on 550)
ROLLOUT_DRIVERS = ('570.86.10', '580.65.06')
# a whole roll-out through the CLI or Ansible: its waves' drains,
# upgrades and agents' cycles (an upper bound, not a timing assertion)
ROLLOUT_TIMEOUT = 2 * deadline.WAIT_S


class DriverRolloutTest(test_cloud.CloudTestCase):

    def rollout_inventory(self, path: str, broken: str | None = None) -> None:
        """contrib/ansible's inventory of the L4 hosts, for this cloud.

        The upgrade rewrites the driver version of the host's simulated
        GPUs, writes its drop-in again and restarts its nova-compute; on
        ``broken`` it fails (its simulated GPUs' file is not where said).
        """
        inventory = {}
        for host in hosts.PCI_HOSTS:
            files = devcloud.host_files(self.cloud, host)
            inventory[host] = {
                'gpu_driver_simulated_file': files['gpus'] + (
                    '.missing' if host == broken else ''),
                'gpu_driver_config_file': files['agent_conf'],
                'gpu_driver_nova_conf_dropin': files['drop_in'],
                'gpu_driver_nova_conf_args': list(
                    devcloud.HOST_NOVA_CONF_ARGS),
                'gpu_driver_nova_compute_restart_command': [
                    sys.executable, '-m', 'gpu_nova_ext_dev.cloud.devcloud',
                    'restart', 'nova-compute-' + host, '--dir',
                    self.cloud.dir],
                # the agent reads the simulated file at each cycle
                'gpu_driver_agent_service': '',
            }
        with open(path, 'w') as f:
            yaml.safe_dump({'all': {'hosts': inventory, 'vars': {
                'ansible_connection': 'local', 'ansible_become': False,
                'ansible_python_interpreter': sys.executable}}}, f)

    def run_rollout(self, argv: list, workdir: str):
        env = dict(self.c.env('admin'), ANSIBLE_HOME=workdir,
                   ANSIBLE_LOCAL_TEMP=os.path.join(workdir, 'tmp'))
        return subprocess.run(argv, env=env, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, cwd=workdir,
                              timeout=ROLLOUT_TIMEOUT)

    def assert_rolled_out(self, progress: str, driver: str,
                          servers: list[str]):
        """Every L4 runs ``driver`` and ``servers`` run on them.

        The hosts take servers again, and in the roll-out's ``progress``
        lines (its runs', in order) no host was out beside another.
        """
        out, most = set(), 0
        for line in progress.splitlines():
            host, _, step = line.partition(': ')
            if step == 'draining':
                out.add(host)
            elif step.startswith('undrained'):
                out.discard(host)
            most = max(most, len(out))
        self.assertEqual((1, set()), (most, out), progress)
        rows = self.c.openstack_json('gpu', 'list', '--model', 'L4')
        # the list shows the branch (Placement's CUSTOM_GPU_DRIVER_<BRANCH>
        # trait when no transport_url is configured)
        self.assertEqual(
            {(h, a, driver.split('.')[0]) for h in hosts.PCI_HOSTS
             for a in (hosts.L4_0, hosts.L4_1)},
            {(r['Host'], r['Address'], r['Driver']) for r in rows}, rows)
        services = self.c.openstack_json('compute', 'service', 'list',
                                         '--service', 'nova-compute')
        self.assertEqual({'enabled'}, {s['Status'] for s in services
                                       if s['Host'] in hosts.PCI_HOSTS})
        for sid in servers:
            shown = self.c.show(sid)
            self.assertEqual('ACTIVE', shown['status'], shown)
            self.assertIn(self.c.host_of(shown), hosts.PCI_HOSTS)

    def test_driver_rollout_over_two_waves_from_cli_and_ansible(self):
        self.addCleanup(self.c.delete_servers, 'roll-')
        servers = [self.boot_active(
            'roll-' + host, fixture.PCI_FLAVOR,
            extra=('--host', host))['id'] for host in hosts.PCI_HOSTS]
        work = self.useFixture(fixtures.TempDir()).path
        inventory = os.path.join(work, 'inventory.yml')
        self.rollout_inventory(inventory, broken=hosts.PCI_HOST_2)
        playbooks = os.path.join(devcloud.TOP, 'contrib', 'ansible')
        # 1. openstack gpu rollout run, the upgrade playbook per host; one
        # host's upgrade fails: the run stops there, that host drained
        state = os.path.join(work, 'rollout-cli.json')
        cli = fixture.openstack_argv(
            'gpu', 'rollout', 'run', '--state-file', state,
            '--upgrade-command',
            'env ANSIBLE_DISPLAY_FAILED_STDERR=true ansible-playbook -i %s '
            '%s --limit {host} -e gpu_driver_version={driver}' % (
                inventory, os.path.join(playbooks, 'gpu-driver-upgrade.yml')))
        first = cli + ['--target-driver', ROLLOUT_DRIVERS[0],
                       '--max-unavailable', '50%', '--model', 'L4',
                       '--all-servers']
        failed = self.run_rollout(first, work)
        self.assertEqual(2, failed.returncode, failed.stdout + failed.stderr)
        self.assertIn('%s: FAILED at upgrade: upgrade command: exit code 2: '
                      'fatal: [%s]' % (hosts.PCI_HOST_2, hosts.PCI_HOST_2),
                      failed.stdout)
        self.assertIn('.missing does not exist', failed.stdout)
        self.assertIn('%s stays drained' % hosts.PCI_HOST_2, failed.stderr)
        status = {s['Host']: s['Status'] for s in self.c.openstack_json(
            'compute', 'service', 'list', '--service', 'nova-compute')}
        self.assertEqual(('enabled', 'disabled'), (
            status[hosts.PCI_HOST], status[hosts.PCI_HOST_2]))
        # the cause fixed, --resume finishes it
        self.rollout_inventory(inventory)
        resumed = self.run_rollout(cli + ['--resume'], work)
        self.assertEqual(0, resumed.returncode,
                         resumed.stdout + resumed.stderr)
        self.assertNotIn('%s: draining' % hosts.PCI_HOST_2, resumed.stdout)
        self.assert_rolled_out(failed.stdout + resumed.stdout,
                               ROLLOUT_DRIVERS[0], servers)
        # 2. the same through gpu-driver-rollout.yml: stopped by a failed
        # upgrade, then the same command again carries it on
        self.rollout_inventory(inventory, broken=hosts.PCI_HOST)
        playbook = [
            os.path.join(fixture.BIN, 'ansible-playbook'), '-i', inventory,
            os.path.join(playbooks, 'gpu-driver-rollout.yml'),
            '-e', json.dumps({
                'gpu_driver_version': ROLLOUT_DRIVERS[1],
                'gpu_rollout_max_unavailable': '50%',
                'gpu_rollout_state_file': os.path.join(work, 'rollout.json'),
                'gpu_rollout_openstack': fixture.openstack_argv()[0],
                'gpu_rollout_extra_args': ['--model', 'L4']})]
        failed = self.run_rollout(playbook, work)
        self.assertEqual(2, failed.returncode, failed.stdout + failed.stderr)
        self.assertIn('%s stays drained' % hosts.PCI_HOST, failed.stdout)
        self.rollout_inventory(inventory)
        resumed = self.run_rollout(playbook, work)
        self.assertEqual(0, resumed.returncode,
                         resumed.stdout + resumed.stderr)
        # it carried on: the failed host retried its upgrade, not its drain
        self.assertIn('%s: upgrading' % hosts.PCI_HOST, resumed.stdout)
        self.assertNotIn('%s: draining' % hosts.PCI_HOST, resumed.stdout)
        # the playbook shows the CLI's progress lines, one JSON string each
        self.assert_rolled_out('\n'.join(
            line.strip().strip('",') for line in
            (failed.stdout + resumed.stdout).splitlines()),
            ROLLOUT_DRIVERS[1], servers)
