# SPDX-License-Identifier: Apache-2.0

"""Prometheus exporter output, parsed with prometheus-client's parser."""
import urllib.request

import prometheus_client
from prometheus_client import parser

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base


def families(text):
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


class TestExporter(health_base.MonitorTestCase):

    def setUp(self):
        super().setUp()
        self.cfg.config(group='agent', prometheus_port=0)

    def _monitor_with_exporter(self):
        m = self.make_monitor()
        m.exporter = exporter.Exporter('cmp-1', '127.0.0.1', 0)
        return m

    def test_dcgm_names_and_labels(self):
        m = self._monitor_with_exporter()
        self.fake.set_metrics(0, gpu_util=37, memory_used_mib=4096,
                              temperature_c=55, power_mw=150500)
        self.fake.inject_xid(0, 48)
        m.sample_once(now=0)
        fams = families(m.exporter.render())
        for name in ('DCGM_FI_DEV_GPU_UTIL', 'DCGM_FI_DEV_FB_USED',
                     'DCGM_FI_DEV_GPU_TEMP', 'DCGM_FI_DEV_POWER_USAGE',
                     'DCGM_FI_DEV_XID_ERRORS', 'DCGM_FI_DEV_SM_CLOCK',
                     'DCGM_FI_DEV_MEM_CLOCK', 'DCGM_FI_DEV_FB_FREE',
                     'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION',
                     'DCGM_FI_DEV_PCIE_REPLAY_COUNTER',
                     'DCGM_FI_DEV_MEMORY_TEMP',
                     'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL',
                     'gpu_nova_ext_health_state',
                     'gpu_nova_ext_anomaly_score'):
            self.assertIn(name, fams)
        util = {s.labels['pci_bus_id']: s for s in
                fams['DCGM_FI_DEV_GPU_UTIL'].samples}
        a100 = util['00000000:3B:00.0']
        self.assertEqual(37.0, a100.value)
        self.assertEqual({'gpu': '0', 'UUID': self.fake.devices[0].uuid,
                          'pci_bus_id': '00000000:3B:00.0',
                          'device': 'nvidia0',
                          'modelName': 'NVIDIA A100 80GB PCIe',
                          'Hostname': 'cmp-1', 'instance_uuid': ''},
                         a100.labels)
        power = [s.value for s in fams['DCGM_FI_DEV_POWER_USAGE'].samples
                 if s.labels['gpu'] == '0']
        self.assertEqual([150.5], power)
        xid = {s.labels['gpu']: s.value
               for s in fams['DCGM_FI_DEV_XID_ERRORS'].samples}
        self.assertEqual({'0': 48.0, '1': 0.0}, xid)
        state = {(s.labels['gpu'], s.labels['state']): s.value
                 for s in fams['gpu_nova_ext_health_state'].samples}
        self.assertEqual(1.0, state[('0', 'unhealthy')])
        self.assertEqual(0.0, state[('0', 'healthy')])
        self.assertEqual(1.0, state[('1', 'healthy')])
        # the T4 has no memory temperature sensor: no series for it
        mem_temp = {s.labels['gpu'] for s in
                    fams['DCGM_FI_DEV_MEMORY_TEMP'].samples}
        self.assertEqual({'0'}, mem_temp)

    def test_own_registry(self):
        m = self._monitor_with_exporter()
        m.sample_once(now=0)
        self.assertNotIn(b'DCGM_FI_DEV_GPU_UTIL',
                         prometheus_client.generate_latest())

    def test_served_over_http_on_loopback(self):
        m = self._monitor_with_exporter()
        m.exporter.start()
        self.addCleanup(m.exporter.stop)
        self.assertNotEqual(0, m.exporter.port)
        self.fake.set_metrics(1, gpu_util=12)
        m.sample_once(now=0)
        url = 'http://127.0.0.1:%d/metrics' % m.exporter.port
        with urllib.request.urlopen(url, timeout=deadline.WAIT_S) as resp:
            text = resp.read().decode()
        util = {s.labels['gpu']: s.value for s in
                families(text)['DCGM_FI_DEV_GPU_UTIL'].samples}
        self.assertEqual(12.0, util['1'])

    def test_gpu_lost_series(self):
        m = self._monitor_with_exporter()
        self.fake.lose(1)
        m.sample_once(now=0)
        fams = families(m.exporter.render())
        lost = {s.labels['gpu']: s.value
                for s in fams['gpu_nova_ext_gpu_lost'].samples}
        self.assertEqual({'0': 0.0, '1': 1.0}, lost)
        code = {s.labels['gpu']: s.value
                for s in fams['gpu_nova_ext_health_code'].samples}
        self.assertEqual(2.0, code['1'])
