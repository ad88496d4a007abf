# SPDX-License-Identifier: Apache-2.0

"""Every phase of devstack/plugin.sh, run by bash against stand-ins of the
devstack functions it calls (standins.sh), in devstack's own order of
phases (stack.sh: install, post-config, then start_nova's
start_nova_compute, which makes nova-cpu.conf a copy of nova.conf, then
extra), asserting the nova.conf, nova-cpu.conf and gpu-nova-agent.conf it
leaves."""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import nova.conf.devices
import nova.conf.pci
import nova.conf.scheduler
from oslo_config import cfg
import oslo_messaging.opts
import testtools

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.operator import fakes

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.abspath(os.path.join(HERE, '..', '..', '..', '..'))
PLUGIN = os.path.join(TOP, 'devstack')

FAKE_CLI = """#!/bin/bash
echo "gpu-nova-ext $*" >> "$CALLS"
out=""
while [ $# -gt 0 ]; do
    if [ "$1" = --output ]; then out=$2; fi
    shift
done
cp "$DROPIN_SOURCE" "$out"
"""

# What stack.sh's lib/nova leaves in nova.conf before plugins run.
NOVA_CONF = """[DEFAULT]
debug = True
compute_driver = libvirt.LibvirtDriver
transport_url = rabbit://stackrabbit:secret@192.0.2.10:5672/

[database]
connection = mysql+pymysql://root:secret@127.0.0.1/nova_cell0

[filter_scheduler]
enabled_filters = ComputeFilter,ComputeCapabilitiesFilter,\
ImagePropertiesFilter,ServerGroupAntiAffinityFilter,\
ServerGroupAffinityFilter,SameHostFilter,DifferentHostFilter
"""


class TestDevstackPlugin(testtools.TestCase):

    def setUp(self):
        super().setUp()
        if not shutil.which('bash'):
            self.skipTest('bash is needed')
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.bin = os.path.join(self.tmp, 'bin')
        os.makedirs(self.bin)
        cli = os.path.join(self.bin, 'gpu-nova-ext')
        with open(cli, 'w') as f:
            f.write(FAKE_CLI)
        os.chmod(cli, 0o755)
        self.nova_conf = os.path.join(self.tmp, 'nova.conf')
        with open(self.nova_conf, 'w') as f:
            f.write(NOVA_CONF)
        # created by start_nova_compute (a fresh node has none before)
        self.cpu_conf = os.path.join(self.tmp, 'nova-cpu.conf')
        self.dropin = os.path.join(self.tmp, 'dropin.conf')
        self.generated = nova_conf.generate(
            fakes.mixed_host(),
            nova_conf.GeneratorOptions(scheduler=False, max_instances=True))
        with open(self.dropin, 'w') as f:
            f.write(self.generated.render())
        self.calls = os.path.join(self.tmp, 'calls')
        self.conf_dir = os.path.join(self.tmp, 'etc', 'gpu-nova-ext')
        self.agent_conf = os.path.join(self.conf_dir, 'gpu-nova-agent.conf')

    def _env(self, **local_conf):
        env = {
            'PATH': os.environ.get('PATH', '/usr/bin:/bin'),
            'DEST': self.tmp, 'DATA_DIR': os.path.join(self.tmp, 'data'),
            'STACK_USER': subprocess.check_output(
                ['id', '-un'], text=True).strip(),
            'NOVA_CONF': self.nova_conf, 'NOVA_CPU_CONF': self.cpu_conf,
            'KEYSTONE_SERVICE_URI': 'http://192.0.2.10/identity',
            'SERVICE_PASSWORD': 'secret', 'SERVICE_DOMAIN_NAME': 'Default',
            'SERVICE_TENANT_NAME': 'service', 'REGION_NAME': 'RegionOne',
            'ENABLE_DEBUG_LOG_LEVEL': 'True',
            'ENABLED_SERVICES': 'key,n-api,n-sch,n-cpu,placement-api',
            'LIBVIRT_GROUP': 'libvirt',
            'GPU_NOVA_EXT_CONF_DIR': self.conf_dir,
            'FAKE_BIN_DIR': self.bin, 'CALLS': self.calls,
            'DROPIN_SOURCE': self.dropin, 'INI_PYTHON': sys.executable,
        }
        env.update(local_conf)
        return env

    # stack.sh's order: the plugin's phases and, between post-config and
    # extra, start_nova (start_nova_compute's copy of nova.conf)
    STACK = ('stack install', 'stack post-config', 'start_nova_compute',
             'stack extra')

    def _run(self, phases, **local_conf):
        script = ['set -eu -o pipefail',
                  'source %s/standins.sh' % HERE,
                  'source %s/settings' % PLUGIN]
        for phase in phases:
            if phase == 'start_nova_compute':
                script.append('is_service_enabled n-cpu && '
                              'start_nova_compute || true')
            else:
                script.append('source %s/plugin.sh %s' % (PLUGIN, phase))
        proc = subprocess.run(['bash', '-c', '\n'.join(script)],
                              env=self._env(**local_conf), text=True,
                              capture_output=True,
                              timeout=deadline.WAIT_S)
        self.assertEqual(0, proc.returncode, proc.stderr + proc.stdout)
        with open(self.calls) as f:
            return f.read().splitlines()

    def _nova(self, path):
        conf = cfg.ConfigOpts()
        nova.conf.pci.register_opts(conf)
        nova.conf.devices.register_opts(conf)
        nova.conf.scheduler.register_opts(conf)
        gconf.register_nova_opts(conf)
        conf(['--config-file', path], default_config_files=[],
             default_config_dirs=[])
        nova.conf.devices.register_dynamic_opts(conf)
        return conf

    def _agent(self, path=None):
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf.register_opt(cfg.StrOpt('transport_url'))
        conf.register_opt(cfg.StrOpt('control_exchange'))
        conf.register_opt(cfg.BoolOpt('debug'))
        for group, opts in oslo_messaging.opts.list_opts():
            if group in ('oslo_messaging_notifications',
                         'oslo_messaging_rabbit'):
                conf.register_opts(opts, group)
        conf(['--config-file', path or self.agent_conf],
             default_config_files=[], default_config_dirs=[])
        return conf

    def test_stack_then_unstack_and_clean(self):
        calls = self._run(self.STACK)
        self.assertIn('define_plugin gpu-nova-ext', calls)
        self.assertIn('setup_develop %s/gpu-nova-ext agent' % self.tmp, calls)
        # in the libvirt group, as devstack runs nova-compute
        self.assertIn('run_process gpu-nova-agent %s/gpu-nova-agent '
                      '--config-file %s libvirt' % (self.bin, self.agent_conf),
                      calls)
        # the remediation daemon is off by default
        self.assertFalse(any('remediat' in c for c in calls), calls)
        # nova.conf: ours appended to what devstack set, nothing lost
        fs = self._nova(self.nova_conf).filter_scheduler
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'gpu_nova_ext.scheduler.filters.all_filters'],
                         fs.available_filters)
        self.assertEqual(
            ['ComputeFilter', 'ComputeCapabilitiesFilter',
             'ImagePropertiesFilter', 'ServerGroupAntiAffinityFilter',
             'ServerGroupAffinityFilter', 'SameHostFilter',
             'DifferentHostFilter', nova_conf.PCI_FILTER] +
            list(nova_conf.GPU_FILTERS),
            fs.enabled_filters)
        self.assertEqual(list(nova_conf.WEIGHT_CLASSES), fs.weight_classes)
        # tunables left empty keep the options' own defaults
        with open(self.nova_conf) as f:
            text = f.read()
        self.assertNotIn('[gpu_weights]', text)
        self.assertNotIn('[gpu_scheduler]', text)
        # the agent's configuration
        agent = self._agent()
        # the schedulers' (top-level) bus, not the cell's of nova-compute,
        # with the agents' own account (devstack's password) and exchange
        # (issue 42)
        self.assertEqual('rabbit://gpu-agent:secret@192.0.2.10:5672/',
                         agent.transport_url)
        self.assertEqual('gpu_nova_ext', agent.control_exchange)
        self.assertFalse(agent.oslo_messaging_rabbit.ssl)
        with open(self.cpu_conf) as f:
            self.assertIn('5672/nova_cell1', f.read())
        self.assertTrue(agent.debug)
        self.assertEqual('annotate', agent.agent.mode)
        self.assertEqual(['libvirt', 'nvml', 'sysfs'],
                         agent.agent.inventory_sources)
        self.assertEqual(self.cpu_conf, agent.agent.nova_config_file)
        self.assertEqual('password', agent.placement.auth_type)
        with open(self.agent_conf) as f:
            text = f.read()
        for line in ('auth_url = http://192.0.2.10/identity',
                     'username = placement', 'password = secret',
                     'project_name = service', 'region_name = RegionOne'):
            self.assertIn(line, text)
        # nova-compute's own configuration is left alone by default
        self.assertEqual([], self._nova(self.cpu_conf).pci.device_spec)

        calls = self._run(['unstack', 'clean'])
        self.assertIn('stop_process gpu-nova-agent', calls)
        self.assertFalse(os.path.exists(self.conf_dir))

    def test_agent_sends_health_notifications(self):
        self._run(self.STACK)
        agent = self._agent()
        self.assertEqual(['messagingv2'],
                         agent.oslo_messaging_notifications.driver)
        self.assertEqual(['notifications'],
                         agent.oslo_messaging_notifications.topics)

    def test_agent_account_over_tls(self):
        self._run(self.STACK, ENABLED_SERVICES='n-cpu,placement-client',
                  GPU_NOVA_EXT_AGENT_RABBIT_TLS='True',
                  GPU_NOVA_EXT_AGENT_RABBIT_USER='gpu',
                  GPU_NOVA_EXT_AGENT_RABBIT_PASSWORD='pw',
                  SSL_BUNDLE_FILE='/opt/stack/data/ca-bundle.pem')
        agent = self._agent()
        self.assertEqual('rabbit://gpu:pw@192.0.2.10:5671/',
                         agent.transport_url)
        self.assertTrue(agent.oslo_messaging_rabbit.ssl)
        self.assertEqual('/opt/stack/data/ca-bundle.pem',
                         agent.oslo_messaging_rabbit.ssl_ca_file)

    def test_agent_account_off(self):
        self._run(self.STACK, GPU_NOVA_EXT_AGENT_RABBIT_ACCOUNT='False')
        agent = self._agent()
        self.assertEqual('rabbit://stackrabbit:secret@192.0.2.10:5672/',
                         agent.transport_url)
        self.assertIsNone(agent.control_exchange)

    def test_pci_passthrough_filter_enabled(self):
        self._run(self.STACK, ENABLED_SERVICES='n-api,n-sch')
        filters = self._nova(self.nova_conf).filter_scheduler.enabled_filters
        self.assertEqual(1, filters.count(nova_conf.PCI_FILTER))
        # before ours, as nova-config.rst orders them
        self.assertLess(filters.index(nova_conf.PCI_FILTER),
                        filters.index(nova_conf.GPU_FILTERS[0]))

    def test_nova_conf_runs_in_the_libvirt_group(self):
        calls = self._run(['stack post-config'],
                          GPU_NOVA_EXT_GENERATE_NOVA_CONF='True')
        cli = [c for c in calls if c.startswith('gpu-nova-ext ')]
        # stack.sh's shell is not in the libvirt group yet: sg first
        self.assertEqual('sg libvirt', calls[calls.index(cli[0]) - 1])

    def test_other_available_filters_kept(self):
        with open(self.nova_conf, 'a') as f:
            f.write('available_filters = nova.scheduler.filters.all_filters\n'
                    'available_filters = acme.filters.RackFilter\n')
        self._run(['stack post-config'])
        self.assertEqual(['nova.scheduler.filters.all_filters',
                          'acme.filters.RackFilter',
                          'gpu_nova_ext.scheduler.filters.all_filters'],
                         self._nova(self.nova_conf)
                         .filter_scheduler.available_filters)

    def test_second_post_config_does_not_duplicate(self):
        self._run(['stack post-config', 'stack post-config'])
        fs = self._nova(self.nova_conf).filter_scheduler
        self.assertEqual(1, fs.enabled_filters.count('GpuModelFilter'))
        self.assertEqual(2, len(fs.available_filters))

    def test_local_conf_overrides(self):
        self._run(['stack post-config'],
                  GPU_NOVA_EXT_AGENT_MODE='inventory',
                  GPU_NOVA_EXT_INVENTORY_SOURCES='libvirt,simulated',
                  GPU_NOVA_EXT_SIMULATED_GPUS_FILE='/opt/gpus.yaml',
                  GPU_NOVA_EXT_RESERVED_GPUS='0000:3b:00.0',
                  GPU_NOVA_EXT_HOST='cmp-1.example',
                  GPU_NOVA_EXT_FILTERS='GpuModelFilter,GpuHealthFilter',
                  GPU_NOVA_EXT_THERMAL_WEIGHT_MULTIPLIER='2.0',
                  GPU_NOVA_EXT_PACKING_WEIGHT_MULTIPLIER='-1.0',
                  GPU_NOVA_EXT_STATE_TTL='300',
                  GPU_NOVA_EXT_INTRA_HOST_POLICY='coolest')
        agent = self._agent()
        self.assertEqual('inventory', agent.agent.mode)
        self.assertEqual(['libvirt', 'simulated'],
                         agent.agent.inventory_sources)
        self.assertEqual('/opt/gpus.yaml', agent.agent.simulated_gpus_file)
        self.assertEqual(['0000:3b:00.0'], agent.agent.reserved_gpus)
        self.assertEqual('cmp-1.example', agent.host)
        nconf = self._nova(self.nova_conf)
        self.assertEqual(['GpuModelFilter', 'GpuHealthFilter'],
                         nconf.filter_scheduler.enabled_filters[-2:])
        self.assertEqual(2.0, nconf.gpu_weights.thermal_weight_multiplier)
        self.assertEqual(-1.0, nconf.gpu_weights.packing_weight_multiplier)
        self.assertEqual(300.0, nconf.gpu_scheduler.state_ttl)
        # the others keep their defaults
        self.assertEqual(0.0, nconf.gpu_weights.power_weight_multiplier)
        self.assertEqual('coolest', nconf.gpu_scheduler.intra_host_policy)

    def test_compute_only_node(self):
        calls = self._run(self.STACK,
                          ENABLED_SERVICES='n-cpu,placement-client')
        with open(self.nova_conf) as f:
            self.assertNotIn('gpu', f.read())
        self.assertTrue(os.path.exists(self.agent_conf))
        self.assertTrue(any(c.startswith('run_process gpu-nova-agent')
                            for c in calls))

    def test_agent_disabled_on_controller(self):
        calls = self._run(['stack post-config', 'stack extra'],
                          ENABLED_SERVICES='n-api,n-sch')
        self.assertFalse(os.path.exists(self.agent_conf))
        self.assertFalse(any(c.startswith('run_process') for c in calls))
        self.assertIn('gpu_nova_ext.scheduler.filters.all_filters',
                      self._nova(self.nova_conf)
                      .filter_scheduler.available_filters)

    def test_generated_nova_conf_merged_into_compute_conf(self):
        calls = self._run(self.STACK,
                          GPU_NOVA_EXT_GENERATE_NOVA_CONF='True',
                          GPU_NOVA_EXT_VGPU_TYPES='nvidia-222,L40S-12Q')
        cli = [c for c in calls if c.startswith('gpu-nova-ext ')]
        self.assertEqual(1, len(cli))
        self.assertIn('nova-conf --no-scheduler --output', cli[0])
        self.assertIn('--vgpu-type nvidia-222 --vgpu-type L40S-12Q', cli[0])
        cpu = self._nova(self.cpu_conf)
        self.assertEqual(self.generated.values('pci', 'device_spec'),
                         cpu.pci.device_spec)
        self.assertEqual(self.generated.values('pci', 'alias'),
                         cpu.pci.alias)
        for spec in cpu.pci.device_spec:
            json.loads(spec)
        self.assertTrue(cpu.pci.report_in_placement)
        self.assertEqual(['nvidia-222', 'nvidia-471'],
                         cpu.devices.enabled_mdev_types)
        self.assertEqual(['0000:84:00.0'],
                         cpu['mdev_nvidia-222'].device_addresses)
        self.assertEqual(4, cpu['mdev_nvidia-471'].max_instances)
        # what was there stays
        with open(self.cpu_conf) as f:
            self.assertIn('compute_driver = libvirt.LibvirtDriver', f.read())
        # this node also runs nova-api/scheduler: they get the aliases, and
        # the scheduler the filter that places passthrough requests
        api = self._nova(self.nova_conf)
        self.assertEqual(self.generated.values('pci', 'alias'),
                         api.pci.alias)
        self.assertTrue(api.filter_scheduler.pci_in_placement)
        self.assertIn(nova_conf.PCI_FILTER,
                      api.filter_scheduler.enabled_filters)

    def test_generated_nova_conf_test_driver_without_sg(self):
        calls = self._run(['stack post-config'],
                          GPU_NOVA_EXT_GENERATE_NOVA_CONF='True',
                          GPU_NOVA_EXT_LIBVIRT_URI='test:///tmp/host.xml')
        self.assertNotIn('sg libvirt', calls)
        self.assertTrue(any(c.startswith('gpu-nova-ext ') for c in calls))

    def test_remediation_daemon_service(self):
        calls = self._run(
            self.STACK + ('unstack',),
            ENABLED_SERVICES='key,n-api,n-sch,placement-api,'
                             'gpu-nova-remediation',
            GPU_NOVA_EXT_REMEDIATION_POLICY='evacuate')
        conf_file = os.path.join(self.conf_dir, 'gpu-nova-remediation.conf')
        self.assertIn('run_process gpu-nova-remediation %s/gpu-nova-ext '
                      '--config-file %s remediate' % (self.bin, conf_file),
                      calls)
        self.assertIn('stop_process gpu-nova-remediation', calls)
        conf = self._agent(conf_file)
        # a dry run unless asked for, through devstack's admin cloud
        self.assertFalse(conf.remediation.enabled)
        self.assertEqual('evacuate', conf.remediation.policy)
        self.assertEqual('devstack-admin', conf.remediation.cloud)
        self.assertEqual('notifications', conf.remediation.listen_topic)
        self.assertEqual('rabbit://stackrabbit:secret@192.0.2.10:5672/',
                         conf.transport_url)
        # it hears the agents' notifications on their exchange
        self.assertEqual('gpu_nova_ext', conf.control_exchange)
        self.assertEqual('password', conf.placement.auth_type)

    def test_generated_nova_conf_legacy_pci(self):
        calls = self._run(self.STACK,
                          GPU_NOVA_EXT_GENERATE_NOVA_CONF='True',
                          GPU_NOVA_EXT_PCI_IN_PLACEMENT='False',
                          ENABLED_SERVICES='n-cpu')
        cli = [c for c in calls if c.startswith('gpu-nova-ext ')]
        self.assertIn('--no-pci-in-placement', cli[0])
        # a compute-only node: nova-compute gets the options, and no
        # scheduler option is written
        cpu = self._nova(self.cpu_conf)
        self.assertEqual(self.generated.values('pci', 'device_spec'),
                         cpu.pci.device_spec)
        with open(self.cpu_conf) as f:
            text = f.read()
        self.assertNotIn('pci_in_placement', text)
        self.assertNotIn('Gpu', text)
