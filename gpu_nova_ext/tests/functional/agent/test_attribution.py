# SPDX-License-Identifier: Apache-2.0

"""Per-server attribution through libvirt's test driver and the fake NVML.

The libvirt host runs three Nova servers (attribution-domains.xml): one
holds the GPU at 0000:86:00.0 by PCI passthrough, one an mdev vGPU of
the A100 at 0000:3b:00.0, one a VF of that A100 (vendor-VFIO vGPU, found
through NVML's VM ID).  The exporter's per-GPU and per-vGPU series carry
the instance UUIDs.
"""
import urllib.request

from prometheus_client import parser

from gpu_nova_ext.agent import attribution
from gpu_nova_ext.agent import exporter
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.unit.agent import health_base
from gpu_nova_ext.tests.unit.inventory import helpers

PASSTHROUGH = '5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f'
MDEV_SERVER = '8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d'
VF_SERVER = 'c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f'
MDEV_UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'


class TestAttribution(health_base.MonitorTestCase):

    GPUS = ('A100_80GB_PCIE', 'T4', 'L4')

    def setUp(self):
        super().setUp()
        self.cfg.config(group='agent', libvirt_uri=helpers.host_uri(
            'attribution-domains.xml'))

    def scrape(self, m):
        m.exporter = exporter.Exporter('cmp-1', '127.0.0.1', 0)
        m.exporter.start()
        self.addCleanup(m.exporter.stop)
        m.sample_once(now=0)
        url = 'http://127.0.0.1:%d/metrics' % m.exporter.port
        with urllib.request.urlopen(url, timeout=deadline.WAIT_S) as resp:
            return {f.name: f for f in parser.text_string_to_metric_families(
                resp.read().decode())}

    def test_series_name_the_servers(self):
        self.fake.set_active_vgpus(0, [
            (471, 40, MDEV_UUID, None),          # mdev vGPU
            (471, 20, None, VF_SERVER.upper()),  # VM ID only
            (471, 5)])                           # nobody we know
        fams = self.scrape(self.make_monitor())
        util = {s.labels['pci_bus_id']: s.labels['instance_uuid']
                for s in fams['DCGM_FI_DEV_GPU_UTIL'].samples}
        self.assertEqual({'00000000:3B:00.0': '', '00000000:5E:00.0': '',
                          '00000000:86:00.0': PASSTHROUGH}, util)
        vgpus = {s.labels['vgpu_instance']: s.labels['instance_uuid']
                 for s in fams['gpu_nova_ext_vgpu_sm_utilization'].samples}
        self.assertEqual({'1000': MDEV_SERVER, '1001': VF_SERVER,
                          '1002': ''}, vgpus)


class TestParseDomain(health_base.HealthTestCase):

    def test_hostdevs(self):
        holders = attribution.Holders()
        attribution.parse_domain("""<domain><uuid>AA-1</uuid><devices>
          <hostdev mode='subsystem' type='pci'><source><address
            domain='0x0000' bus='0xff' slot='0x1f' function='0x7'/>
          </source></hostdev>
          <hostdev mode='subsystem' type='pci'><source><address
            domain='0x0000' bus='0x1ff' slot='0x00' function='0x0'/>
          </source></hostdev>
          <hostdev mode='subsystem' type='mdev'><source><address
            uuid='ABC'/></source></hostdev>
          <hostdev mode='subsystem' type='usb'><source><vendor id='1'/>
          </source></hostdev></devices></domain>""", holders)
        self.assertEqual(({'0000:ff:1f.7': 'aa-1'}, {'abc': 'aa-1'},
                          {'aa-1'}),
                         (holders.by_pci, holders.by_mdev, holders.domains))

    def test_unreachable_libvirt_attributes_nothing(self):
        attr = attribution.Attribution('test:///nonexistent/host.xml')
        self.assertEqual({}, attr.refresh(0.0).by_pci)
        self.assertIsNotNone(attr._failed_at)
