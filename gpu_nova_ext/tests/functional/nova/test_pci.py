# SPDX-License-Identifier: Apache-2.0

"""Scenario 7: PCI-in-Placement GPUs (pci_passthrough:alias) with our filters.

The host's nova.conf comes from our own generator, as an operator makes
it: the agent's discovery of the host feeds ``gpu-nova-ext nova-conf``'s
:func:`~gpu_nova_ext.operator.nova_conf.generate`, whose ``[pci]
device_spec`` (per-model resource class, our static traits as tags) and
``alias`` configure nova-compute, nova-api and nova-scheduler here.
"""
from nova.tests.functional.libvirt import base as libvirt_base

from gpu_nova_ext.tests.functional.nova import base

HOST = 'pci1'
A100_0 = '0000:81:00.0'
A100_1 = '0000:81:01.0'
L4_0 = '0000:81:02.0'
A100_ALIAS = 'gpu-a100-80gb-pcie'
L4_ALIAS = 'gpu-l4'
HOT = dict(base.IDLE, temperature_c=70)
COOL = dict(base.IDLE, temperature_c=35)


class PciInPlacementGpuTest(base.GpuSchedulerMixin, base.GpuAgentMixin,
                            libvirt_base.ServersTestBase):
    """One host with two A100s and an L4 passed through whole."""

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS

    def setUp(self):
        super().setUp()
        a100 = ('20b5', 'GA100 [A100 PCIe 80GB]')
        self.drop_in, self.payload = self.start_pci_in_placement_host(HOST, (
            a100 + (base.gpu(base.A100, metrics=HOT),),     # A100_0
            a100 + (base.gpu(base.A100, metrics=COOL),),    # A100_1
            ('27b8', 'AD104GL [L4]', base.gpu(base.L4))))   # L4_0

    def _rp(self, address):
        return '%s_%s' % (HOST, address.upper())

    def test_generated_nova_conf_and_agent_on_pci_providers(self):
        self.assertEqual(3, len(self.drop_in.values('pci', 'device_spec')))
        self.assertEqual(2, len(self.drop_in.values('pci', 'alias')))
        a100 = self._get_provider_uuid_by_name(self._rp(A100_0))
        l4 = self._get_provider_uuid_by_name(self._rp(L4_0))
        # Nova made the providers from the generated device_spec: per-model
        # resource class, our static traits from its tags
        self.assertEqual(
            {'CUSTOM_GPU_A100_80GB_PCIE'},
            set(self._get_provider_inventory(a100)))
        a100_traits = set(self._get_provider_traits(a100))
        self.assertTrue({'CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                         'CUSTOM_GPU_VENDOR_NVIDIA',
                         'CUSTOM_GPU_MODE_PASSTHROUGH'} <= a100_traits,
                        a100_traits)
        self.assertIn('CUSTOM_GPU_MODEL_L4', self._get_provider_traits(l4))
        # the agent knows each GPU by its PCI provider, writes nothing there
        by_address = {g['pci_address']: g for g in self.payload['gpus']}
        self.assertEqual([a100], by_address[A100_0]['provider_uuids'])
        self.assertEqual([l4], by_address[L4_0]['provider_uuids'])
        self.assertEqual('passthrough', by_address[A100_0]['mode'])
        self.run_agent(HOST)
        self.computes[HOST].manager.rt.reportclient.clear_provider_cache()
        self._run_periodics()
        self.assertEqual(a100_traits, set(self._get_provider_traits(a100)))

    def test_filters_choose_among_pci_gpus(self):
        # coolest: the cooler of the two A100s
        server = self.boot({'pci_passthrough:alias': '%s:1' % A100_ALIAS,
                            'gpu:intra_host_policy': 'coolest'})
        self.assertEqual((HOST, self._rp(A100_1)), self.gpu_of(server))
        self.run_agent(HOST)
        # capability: the L4 is 8.9, so 9.0 finds nothing
        self.boot({'pci_passthrough:alias': '%s:1' % L4_ALIAS,
                   'gpu:cuda_cc_min': '9.0'}, expected_state='ERROR')
        server = self.boot({'pci_passthrough:alias': '%s:1' % L4_ALIAS,
                            'gpu:cuda_cc_min': '8.9'})
        self.assertEqual((HOST, self._rp(L4_0)), self.gpu_of(server))
        # memory: the L4 has 24 GB, not 40
        self.boot({'pci_passthrough:alias': '%s:1' % L4_ALIAS,
                   'gpu:memory_min': '40GB'}, expected_state='ERROR')
        # model: no L4 behind the A100 alias
        self.boot({'pci_passthrough:alias': '%s:1' % A100_ALIAS,
                   'gpu:model': 'L4'}, expected_state='ERROR')

    def test_unhealthy_pci_gpu_is_skipped(self):
        self.gpu_facts[HOST][A100_1]['health'] = 'unhealthy'
        self.run_agent(HOST)
        # the cool A100 is unhealthy: the hot one, even for coolest
        server = self.boot({'pci_passthrough:alias': '%s:1' % A100_ALIAS,
                            'gpu:intra_host_policy': 'coolest'})
        self.assertEqual((HOST, self._rp(A100_0)), self.gpu_of(server))
        self.run_agent(HOST)
        # only the unhealthy A100 is free: no valid host ...
        self.boot({'pci_passthrough:alias': '%s:1' % A100_ALIAS},
                  expected_state='ERROR')
        # ... unless the flavor accepts any health
        server = self.boot({'pci_passthrough:alias': '%s:1' % A100_ALIAS,
                            'gpu:health': 'any'})
        self.assertEqual((HOST, self._rp(A100_1)), self.gpu_of(server))
