# SPDX-License-Identifier: Apache-2.0

"""GpuEnergyWeigher, and power caps as the weighers see them."""
from gpu_nova_ext.scheduler.weighers import capability
from gpu_nova_ext.scheduler.weighers import metric
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no
from gpu_nova_ext.tests.unit.scheduler import test_weighers


def _gpu(host, model='A100_80GB_PCIE', limit=300.0, draw=200.0,
         profile=None):
    gpu = no.gpu_state(host, 0, model=model, power=draw)
    gpu['metrics']['power_limit_w'] = limit
    if profile:
        gpu['power_profile'] = profile
    return gpu


class TestEnergyWeigher(test_weighers.WeigherTestCase):

    def setUp(self):
        super().setUp()
        # A100 (3.2) at 300 W, the same capped to 210 W, an H100 (10) at
        # 700 W and an L4 (1.2) at 72 W: work per watt 0.0107, 0.0152,
        # 0.0143, 0.0167
        self.add_host('a100', [_gpu('a100')])
        self.add_host('a100-capped', [_gpu('a100-capped', limit=210.0,
                                           profile='efficiency')])
        self.add_host('h100', [_gpu('h100', model='H100_SXM5_80GB',
                                    limit=700.0)])
        self.add_host('l4', [_gpu('l4', model='L4', limit=72.0, draw=40)])

    def test_off_by_default(self):
        weighed = no.weigh([capability.GpuEnergyWeigher()],
                           self.hosts(['a100', 'l4']),
                           no.request_spec(test_weighers.VGPU))
        self.assertEqual([0.0, 0.0], [w.weight for w in weighed])

    def test_least_energy_per_unit_of_work_first(self):
        self.flags(energy_weight_multiplier=1.0, group='gpu_weights')
        self.assertEqual(['l4', 'a100-capped', 'h100', 'a100'],
                         self.ranking([capability.GpuEnergyWeigher()],
                                      self.hosts(['a100', 'a100-capped',
                                                  'h100', 'l4'])))

    def test_scores_overridable(self):
        self.flags(energy_weight_multiplier=1.0, group='gpu_weights')
        self.flags(capability_scores={'L4': '0.1'}, group='gpu_weights')
        self.assertEqual('l4', self.ranking(
            [capability.GpuEnergyWeigher()], self.hosts(['a100', 'l4']))[-1])


class TestCappedIsNotIdle(test_weighers.WeigherTestCase):

    def test_power_headroom_is_against_the_cap(self):
        # the same 200 W draw: far from the 300 W default limit, near a
        # 210 W cap; the capped GPU is the busier one
        self.add_host('free', [_gpu('free')])
        self.add_host('capped', [_gpu('capped', limit=210.0)])
        self.flags(power_weight_multiplier=1.0, group='gpu_weights')
        self.assertEqual(['free', 'capped'], self.ranking(
            [metric.GpuPowerWeigher()], self.hosts(['capped', 'free'])))
