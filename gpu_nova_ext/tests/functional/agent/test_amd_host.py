# SPDX-License-Identifier: Apache-2.0

"""An agent over a fake AMD host: discovery, metrics, exporter, health.

The host has no NVIDIA driver (the real pynvml finds no library) and two
AMD Instinct MI300X in a sysfs tree built like amdgpu's.  The agent's
parts run as in gpu-nova-agent: discovery with the sysfs source, the
health monitor with its default sampler (NVML and sysfs), the exporter
over HTTP, ``apply()`` into the inventory the state payload is built
from.  An uncorrectable RAS error turns a GPU unhealthy; after the GPU
reset clears the count and the recovery period passes it is healthy.
"""
import urllib.request

from prometheus_client import parser

from gpu_nova_ext.agent import monitor
from gpu_nova_ext.inventory import manager
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base

GPU0, GPU1 = '0000:11:00.0', '0000:8b:00.0'


class TestAgentOnAmdHost(health_base.HealthTestCase):

    GPUS = ()

    def setUp(self):
        super().setUp()
        # no libnvidia-ml.so.1: NVML cannot open, as on an AMD host
        self.useFixture(fake_nvml.FakeNvml([], library=False))
        self.tree = self.useFixture(sysfs.GpuTree())
        for address in (GPU0, GPU1):
            self.tree.add_amd_gpu(address)
            self.tree.add_vf(address[:-4] + '02.0', pf=address,
                             vendor='1002', device='74b5',
                             driver='vfio-pci', klass=0x120000)
        self.cfg.config(group='agent', sysfs_root=self.tree.root,
                        inventory_sources=['sysfs'], prometheus_port=0)
        self.now = 0.0
        self.notifier = health_base.RecordingNotifier()
        self.changes = []
        self.monitor = monitor.HealthMonitor(
            self.conf, lambda: self.changes.append(self.now),
            clock=lambda: self.now, notifier=self.notifier)
        self.assertTrue(self.monitor.open())
        self.addCleanup(self.monitor.stop)
        exporter = monitor.exporter_mod.Exporter('cmp-amd', '127.0.0.1', 0)
        self.monitor.exporter = exporter
        exporter.start()

    def scrape(self):
        url = 'http://127.0.0.1:%d/metrics' % self.monitor.exporter.port
        with urllib.request.urlopen(url, timeout=deadline.WAIT_S) as resp:
            text = resp.read().decode()
        return {f.name: f for f in parser.text_string_to_metric_families(
            text)}

    def health_of(self, families, bus_id):
        return {s.labels['state']: s.value
                for s in families['gpu_nova_ext_health_state'].samples
                if s.labels['pci_bus_id'] == bus_id}

    def step(self, seconds=0.0):
        self.now += seconds
        self.monitor.sample_once(now=self.now)
        inventory = manager.discover(self.conf)
        self.monitor.apply(inventory)
        return {g.pci_address: g for g in inventory.gpus}

    def test_metrics_ras_unhealthy_and_recovery(self):
        self.tree.set(GPU0, 'gpu_busy_percent', 64)
        gpus = self.step()
        self.assertEqual([GPU0, GPU1], sorted(gpus))
        gpu = gpus[GPU0]
        self.assertEqual(('amd', 'MI300X', ['0000:11:02.0'], 'healthy'),
                         (gpu.vendor, gpu.model, gpu.vfs,
                          gpu.health.state))
        self.assertEqual(64, gpu.metrics['utilization_pct'])
        self.assertEqual(300, gpu.metrics['memory_used_mib'])
        self.assertEqual(100.0, gpu.to_state()['metrics'][
            'slowdown_temperature_c'])
        fams = self.scrape()
        util = {s.labels['pci_bus_id']: s for s in
                fams['gpu_gfx_activity'].samples}
        self.assertEqual(64.0, util['00000000:11:00.0'].value)
        self.assertEqual({'gpu': '0', 'UUID': '0x5f8a1c0e3a2b4d7e',
                          'pci_bus_id': '00000000:11:00.0',
                          'device': 'card0', 'modelName': 'MI300X',
                          'Hostname': 'cmp-amd', 'instance_uuid': ''},
                         util['00000000:11:00.0'].labels)
        for name in ('gpu_used_vram', 'gpu_total_vram', 'gpu_power_usage',
                     'gpu_junction_temperature', 'gpu_ecc_uncorrect_total',
                     'DCGM_FI_DEV_POWER_MGMT_LIMIT'):
            self.assertIn(name, fams)
        self.assertNotIn('DCGM_FI_DEV_GPU_UTIL', fams)
        self.assertNotIn('DCGM_FI_DEV_XID_ERRORS', fams)

        self.tree.ras(GPU0, 'umc', 1, 0)           # uncorrectable error
        gpus = self.step(5)
        self.assertEqual(('unhealthy', ['uncorrectable RAS errors']),
                         (gpus[GPU0].health.state,
                          gpus[GPU0].health.reasons))
        self.assertEqual('healthy', gpus[GPU1].health.state)
        self.assertEqual([5.0], self.changes)       # cast at once
        self.assertEqual(1.0, self.health_of(self.scrape(),
                                             '00000000:11:00.0')[
            'unhealthy'])
        self.assertEqual(('healthy', 'unhealthy'),
                         (self.notifier.payloads[0]['old_state'],
                          self.notifier.payloads[0]['new_state']))

        self.tree.ras(GPU0, 'umc', 0, 0)           # reset clears counts
        self.assertEqual('unhealthy', self.step(10)[GPU0].health.state)
        gpus = self.step(30)                       # recovery_period
        self.assertEqual(('healthy', []), (gpus[GPU0].health.state,
                                           gpus[GPU0].health.reasons))
        self.assertEqual(1.0, self.health_of(self.scrape(),
                                             '00000000:11:00.0')['healthy'])
        self.assertEqual(2, len(self.changes))
