# SPDX-License-Identifier: Apache-2.0

"""Which allocations are GPU allocations, and of which kind."""
import testtools

from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import remediation_policy as policy
from gpu_nova_ext.operator import resource_classes


class TestClasses(testtools.TestCase):

    def test_every_class_we_configure_is_a_gpu_class(self):
        for rc in ('VGPU', 'PGPU', 'CUSTOM_PCI_10DE_20B5',
                   resource_classes.pci_resource_class('L4'),
                   resource_classes.vgpu_resource_class('L40S-12Q'),
                   resource_classes.mdev_resource_class('A100 80GB PCIe')):
            self.assertTrue(gpu_consumers.is_gpu_class(rc), rc)
        for rc in ('VCPU', 'CUSTOM_PCI_8086_1592', 'CUSTOM_NIC'):
            self.assertFalse(gpu_consumers.is_gpu_class(rc), rc)

    def test_kind(self):
        for rc, kind in (
                ('VGPU', policy.KIND_VGPU),
                ('CUSTOM_VGPU_A100_80GB_PCIE', policy.KIND_VGPU),
                ('CUSTOM_GPU_VGPU_L40S_12Q', policy.KIND_VGPU),
                ('CUSTOM_GPU_A100_80GB_PCIE', policy.KIND_PASSTHROUGH),
                ('CUSTOM_PCI_10DE_20B5', policy.KIND_PASSTHROUGH)):
            self.assertEqual(kind, gpu_consumers.kind_of({rc: 1}), rc)
