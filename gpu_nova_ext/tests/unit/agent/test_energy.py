# SPDX-License-Identifier: Apache-2.0

"""Energy per server: the ledger, the exporter, the agent's state."""
from oslotest import base as test_base
from prometheus_client import parser

from gpu_nova_ext.agent import energy
from gpu_nova_ext.agent import exporter
from gpu_nova_ext.agent import sampler
from gpu_nova_ext.inventory import base
from gpu_nova_ext.tests.unit.agent import health_base
from gpu_nova_ext.tests.unit.inventory import helpers

VM1 = '6a1c0b0e-1111-4c1e-9b7e-000000000001'
VM2 = '6a1c0b0e-2222-4c1e-9b7e-000000000002'
# the servers of attribution-domains.xml
PASSTHROUGH = '5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f'
MDEV_SERVER = '8a7b6c5d-4e3f-4a1b-9c8d-7e6f5a4b3c2d'
VF_SERVER = 'c3d4e5f6-a7b8-4c9d-8e0f-1a2b3c4d5e6f'
MDEV_UUID = '4b20d080-1b54-4048-85b3-a6a62d165c01'


def sample(joules, server=None, vgpus=(), address='0000:3b:00.0'):
    s = sampler.GpuSample(index=0, pci_address=address,
                          bus_id='00000000:3B:00.0', uuid='GPU-x',
                          name='NVIDIA A100 80GB PCIe', timestamp=0.0,
                          metrics={'energy_j': joules})
    s.instance_uuid = server
    s.vgpus = [dict(v) for v in vgpus]
    return s


class TestLedger(test_base.BaseTestCase):

    def test_whole_gpu_vgpus_idle_and_reload(self):
        ledger = energy.EnergyLedger()
        ledger.add([sample(1000.0)], 0)           # first reading: a base
        ledger.add([sample(1500.0)], 1)           # nobody on it: idle
        ledger.add([sample(2500.0, server=VM1)], 2)
        ledger.add([sample(2800.0, vgpus=[
            {'instance_uuid': VM1, 'sm_util_pct': 20},
            {'instance_uuid': VM2, 'sm_util_pct': 80}])], 3)
        ledger.add([sample(10.0, server=VM1)], 4)  # driver reload
        ledger.add([sample(110.0, vgpus=[
            {'instance_uuid': VM1}, {'instance_uuid': VM2}])], 5)
        totals = {s: j for s, (_a, j) in ledger.by_server().items()}
        self.assertAlmostEqual(1000.0 + 60.0 + 50.0, totals[VM1])
        self.assertAlmostEqual(240.0 + 50.0, totals[VM2])
        self.assertEqual({'0000:3b:00.0': 500.0}, ledger.idle())

    def test_a_server_gone_for_an_hour_is_forgotten(self):
        ledger = energy.EnergyLedger()
        ledger.add([sample(0.0, server=VM1)], 0)
        ledger.add([sample(10.0, server=VM1)], 1)
        ledger.add([sample(20.0)], 2)
        ledger.add([sample(30.0)], 1 + energy.RETAIN_S + 1)
        self.assertEqual({}, ledger.by_server())


class TestExportedAndInState(health_base.MonitorTestCase):
    """libvirt's test driver runs the servers (attribution-domains.xml)."""

    GPUS = ('A100_80GB_PCIE', 'T4', 'L4')

    def setUp(self):
        super().setUp()
        self.cfg.config(group='agent', libvirt_uri=helpers.host_uri(
            'attribution-domains.xml'))

    def test_server_energy_series_and_state_metric(self):
        self.fake.set_active_vgpus(0, [
            (471, 40, MDEV_UUID, None), (471, 20, None, VF_SERVER),
            (471, 20)])                          # a server we do not know
        for gpu in range(3):
            self.fake.set_metrics(gpu, energy_mj=1000000, power_mw=0)
        m = self.make_monitor()
        m.exporter = exporter.Exporter('cmp-1', '127.0.0.1', 0)
        m.sample_once(now=0)
        self.fake.set_metrics(0, energy_mj=9000000)     # +8000 J
        self.fake.set_metrics(2, energy_mj=4000000)     # +3000 J
        m.sample_once(now=1)
        fams = {f.name: f for f in parser.text_string_to_metric_families(
            m.exporter.render())}
        series = {s.labels['instance_uuid']: s.value for s in
                  fams['gpu_nova_ext_server_energy_joules'].samples}
        self.assertEqual({PASSTHROUGH: 3000.0, MDEV_SERVER: 4000.0,
                          VF_SERVER: 2000.0}, series)
        self.assertEqual({'0000:3b:00.0': 2000.0}, m.energy.idle())
        per_gpu = {s.labels['pci_bus_id']: (s.labels['instance_uuid'],
                                            s.value)
                   for s in fams['gpu_nova_ext_energy_joules'].samples}
        self.assertEqual((PASSTHROUGH, 4000.0), per_gpu['00000000:86:00.0'])
        # the agent's state carries each GPU's energy counter
        inventory = base.HostInventory(host='cmp-1', gpus=[
            base.Gpu(pci_address='0000:86:00.0', vendor='nvidia')])
        m.apply(inventory)
        self.assertEqual(4000.0, inventory.gpus[0].to_state()['metrics'][
            'energy_j'])
