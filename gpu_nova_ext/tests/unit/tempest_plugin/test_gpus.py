# SPDX-License-Identifier: Apache-2.0

"""The Tempest plugin's pure part: which flavors, which allocations.

The flavors' extra specs are the ones ``openstack gpu flavor create``
writes (:func:`gpu_nova_ext.operator.flavor.extra_specs`).  Tempest is not
needed (nor imported).
"""
import dataclasses

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import flavor as op_flavor
from gpu_nova_ext.tempest_plugin import gpus


def made(flavor_id, name, public=True, **request):
    """A Nova flavor as the cloud lists it, made by our flavor command."""
    return {'id': flavor_id, 'name': name,
            'os-flavor-access:is_public': public,
            'extra_specs': op_flavor.extra_specs(
                op_flavor.GpuFlavorRequest(**request))}


def plain(flavor_id, name, **specs):
    return {'id': flavor_id, 'name': name,
            'os-flavor-access:is_public': True, 'extra_specs': specs}


CLOUD = [
    made('1', 'gpu.a100.vgpu', model='A100_80GB_PCIE'),
    made('2', 'gpu.l4.pci', model='L4', mode='passthrough'),
    made('3', 'gpu.l4.pci.x2', model='L4', mode='passthrough', count=2),
    made('4', 'gpu.l40s.12q', model='L40S', vgpu_backend='vfio',
         vgpu_type='L40S-12Q'),
    made('5', 'gpu.private', public=False, model='A100_80GB_PCIE'),
    plain('6', 'm1.small'),
    # another custom resource: not a GPU (the scheduler's "maybe")
    plain('7', 'fpga.small', **{'resources:CUSTOM_FPGA_X': '1'}),
    # Nova's own keys only, no gpu: key
    plain('8', 'vgpu.bare', **{'resources:VGPU': '1'}),
    plain('9', 'pci.bare', **{'pci_passthrough:alias': 'a40:1'}),
]


class TestSelectFlavors(testtools.TestCase):

    def names(self, selected):
        return [f.name for f in selected]

    def test_every_public_gpu_flavor_by_default(self):
        self.assertEqual(
            ['gpu.a100.vgpu', 'gpu.l4.pci', 'gpu.l4.pci.x2',
             'gpu.l40s.12q', 'pci.bare', 'vgpu.bare'],
            self.names(gpus.select_flavors(CLOUD, [], [])))

    def test_excluded_by_name_or_id(self):
        self.assertEqual(
            ['gpu.a100.vgpu', 'gpu.l40s.12q', 'pci.bare', 'vgpu.bare'],
            self.names(gpus.select_flavors(CLOUD, [],
                                           ['gpu.l4.pci', '3', 'nope'])))

    def test_named_flavors_private_too(self):
        selected = gpus.select_flavors(CLOUD, ['5', 'gpu.l4.pci'], [])
        self.assertEqual(['gpu.l4.pci', 'gpu.private'], self.names(selected))
        self.assertFalse(selected[1].is_public)

    def test_named_flavor_not_of_the_cloud(self):
        exc = self.assertRaises(exception.InvalidOption,
                                gpus.select_flavors, CLOUD, ['gpu.h100'],
                                [])
        self.assertIn('[gpu_nova_ext] flavors', str(exc))
        self.assertIn("'gpu.h100'", str(exc))
        self.assertIn('gpu.a100.vgpu', str(exc))

    def test_named_flavor_without_gpu(self):
        exc = self.assertRaises(exception.InvalidOption,
                                gpus.select_flavors, CLOUD, ['fpga.small'],
                                [])
        self.assertIn('asks for no GPU', str(exc))

    def test_kinds_and_models(self):
        got = {f.name: (f.kind, f.model)
               for f in gpus.select_flavors(CLOUD, [], [])}
        self.assertEqual({
            'gpu.a100.vgpu': ('vgpu', 'A100_80GB_PCIE'),
            'gpu.l4.pci': ('passthrough', 'L4'),
            'gpu.l4.pci.x2': ('passthrough', 'L4'),
            # a vendor VFIO vGPU asks through a PCI alias: gpu:mode says
            'gpu.l40s.12q': ('vgpu', 'L40S'),
            'pci.bare': ('passthrough', None),
            'vgpu.bare': ('vgpu', None),
        }, got)


class TestResizeTarget(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.flavors = {f.name: f for f in gpus.select_flavors(CLOUD, [],
                                                               [])}

    def test_passthrough_one_to_two_gpus(self):
        self.assertEqual('gpu.l4.pci.x2', gpus.resize_target(
            self.flavors['gpu.l4.pci'], self.flavors.values()).name)
        self.assertEqual('gpu.l4.pci', gpus.resize_target(
            self.flavors['gpu.l4.pci.x2'], self.flavors.values()).name)

    def test_never_to_a_smaller_disk(self):
        large = gpus.gpu_flavor(dict(
            made('10', 'gpu.a100.vgpu.large', model='A100_80GB_PCIE'),
            disk=20, **{'OS-FLV-EXT-DATA:ephemeral': 0}))
        small = gpus.gpu_flavor(dict(
            made('11', 'gpu.a100.vgpu.small', model='A100_80GB_PCIE'),
            disk=10))
        self.assertEqual((20, 0), (large.disk, large.ephemeral))
        # up, but not down (Nova refuses to shrink a disk)
        self.assertEqual(large, gpus.resize_target(small, [small, large]))
        self.assertIsNone(gpus.resize_target(large, [small, large]))
        # nor to a smaller ephemeral disk
        eph = dataclasses.replace(small, disk=20, ephemeral=5)
        self.assertIsNone(gpus.resize_target(eph, [eph, large]))
        self.assertEqual(eph, gpus.resize_target(large, [large, eph]))

    def test_no_flavor_of_the_same_kind_and_model(self):
        # the other vGPU flavors are of another model (or none)
        self.assertIsNone(gpus.resize_target(
            self.flavors['gpu.a100.vgpu'], self.flavors.values()))


class TestAllocations(testtools.TestCase):

    def test_only_gpu_resources(self):
        allocations = {
            'node': {'resources': {'VCPU': 1, 'MEMORY_MB': 512,
                                   'DISK_GB': 1}},
            'pgpu': {'resources': {'CUSTOM_VGPU_A100_80GB_PCIE': 1}},
            'pci': {'resources': {'CUSTOM_PCI_10DE_27B8': 1}},
        }
        self.assertEqual({'pgpu': {'CUSTOM_VGPU_A100_80GB_PCIE': 1},
                          'pci': {'CUSTOM_PCI_10DE_27B8': 1}},
                         gpus.gpu_allocations(allocations))

    def test_no_gpu(self):
        self.assertEqual({}, gpus.gpu_allocations(
            {'node': {'resources': {'VCPU': 1}}}))
        self.assertEqual({}, gpus.gpu_allocations({}))

    def test_addresses_of_nova_provider_names(self):
        # libvirt's pGPU provider, and a PCI-in-Placement device's
        self.assertEqual('0000:84:00.0',
                         gpus.gpu_address('cloud-vgpu_pci_0000_84_00_0'))
        self.assertEqual('0000:3b:00.0',
                         gpus.gpu_address('cloud-pci_0000:3B:00.0'))
        self.assertIsNone(gpus.gpu_address('cloud-pci'))
