# SPDX-License-Identifier: Apache-2.0

"""The pure translation: no Placement, no mocks."""
import testtools

from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming
from gpu_nova_ext.placement import translation as t

NODE = 'cmp-1.example'
ROOT = 'root-uuid'


def gpu(addr='0000:3b:00.0', mode='vgpu', **kw):
    facts = dict(vendor='nvidia', model='A100_80GB_PCIE', memory_mib=81920,
                 cuda_cc='8.0', driver_version='550.54.15',
                 mig_capable=True, mig_enabled=False)
    facts.update(kw)
    return base.Gpu(pci_address=addr, mode=mode, **facts)


def rp(name, uuid=None, parent=ROOT, **kw):
    return t.ExistingProvider(uuid=uuid or name + '-uuid', name=name,
                              parent_uuid=parent, generation=1, **kw)


def root():
    return rp(NODE, ROOT, parent=None, traits=frozenset())


def by_name(desired):
    return {d.name: d for d in desired.providers}


class TestGpuTraits(testtools.TestCase):

    def test_full_vocabulary(self):
        self.assertEqual({
            'CUSTOM_GPU_VENDOR_NVIDIA', 'CUSTOM_GPU_MODEL_A100_80GB_PCIE',
            'CUSTOM_GPU_MEMORY_80GB', 'CUSTOM_GPU_CUDA_CC_8_0',
            'CUSTOM_GPU_DRIVER_550', 'CUSTOM_GPU_MODE_VGPU',
            'CUSTOM_GPU_MIG_CAPABLE'}, t.gpu_traits(gpu()))

    def test_unknown_facts_give_no_trait(self):
        bare = base.Gpu(pci_address='0000:3b:00.0')
        self.assertEqual(frozenset(), t.gpu_traits(bare))

    def test_standard_cuda_trait_where_os_traits_has_one(self):
        traits = t.gpu_traits(gpu(cuda_cc='7.0', model='V100'))
        self.assertIn('HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0', traits)
        self.assertIn('CUSTOM_GPU_MIG_CAPABLE', traits)

    def test_mode_override(self):
        self.assertIn('CUSTOM_GPU_MODE_PASSTHROUGH',
                      t.gpu_traits(gpu(mode=None), 'passthrough'))


class TestMergeTraits(testtools.TestCase):

    def test_keeps_other_writers_traits(self):
        actual = {'OWNER_NOVA', 'CUSTOM_RACK', 'CUSTOM_GPU_MODEL_OLD',
                  'HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0'}
        merged = t.merge_traits(actual, {'CUSTOM_GPU_MODEL_NEW'})
        self.assertEqual({'OWNER_NOVA', 'CUSTOM_RACK',
                          'HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0',
                          'CUSTOM_GPU_MODEL_NEW'}, merged)

    def test_owned_providers_drop_stale_standard_cuda_trait(self):
        merged = t.merge_traits({'HW_GPU_CUDA_COMPUTE_CAPABILITY_V7_0',
                                 'CUSTOM_X'}, set(), owned=True)
        self.assertEqual({'CUSTOM_X'}, merged)

    def test_inventory_differs(self):
        want = {'CUSTOM_GPU_A100': {'total': 1, 'reserved': 0}}
        have = {'CUSTOM_GPU_A100': {'total': 1, 'reserved': 0,
                                    'allocation_ratio': 1.0}}
        self.assertFalse(t.inventory_differs(have, want))
        self.assertTrue(t.inventory_differs(None, want))
        self.assertTrue(t.inventory_differs(
            {'CUSTOM_GPU_A100': {'total': 1, 'reserved': 1}}, want))


class TestAnnotate(testtools.TestCase):

    def test_pgpu_pci_and_legacy(self):
        inv = base.HostInventory(host='cmp-1', gpus=[
            gpu('0000:3b:00.0'),
            gpu('0000:5e:00.0', mode='passthrough'),
            gpu('0000:86:00.0', mode='passthrough', model='L40S',
                memory_mib=46068)])
        existing = [
            root(),
            rp(NODE + '_pci_0000_3b_00_0'),
            rp(NODE + '_0000:5E:00.0'),
        ]
        out = t.translate(inv, nodename=NODE, root_uuid=ROOT,
                          existing=existing)
        provs = by_name(out)
        # the PCI provider gets nothing (Nova owns its traits)
        self.assertNotIn(NODE + '_0000:5E:00.0', provs)
        pgpu = provs[NODE + '_pci_0000_3b_00_0']
        self.assertEqual(t.KIND_PGPU, pgpu.kind)
        self.assertIn('CUSTOM_GPU_MODEL_A100_80GB_PCIE', pgpu.traits)
        # the GPU that no provider represents describes the root
        root_traits = provs[NODE].traits
        self.assertIn(naming.HOST_TRAIT, root_traits)
        self.assertIn('CUSTOM_GPU_MODEL_L40S', root_traits)
        self.assertIn('CUSTOM_GPU_MODE_PASSTHROUGH', root_traits)
        self.assertNotIn('CUSTOM_GPU_MODEL_A100_80GB_PCIE', root_traits)
        self.assertEqual({
            '0000:3b:00.0': [NODE + '_pci_0000_3b_00_0'],
            '0000:5e:00.0': [NODE + '_0000:5E:00.0'],
            '0000:86:00.0': []}, out.gpu_providers)
        self.assertEqual([], out.delete)

    def test_vf_pgpu_providers(self):
        g = gpu(vfs=['0000:3b:00.5', '0000:3b:00.4'])
        existing = [root(), rp(NODE + '_pci_0000_3b_00_4'),
                    rp(NODE + '_pci_0000_3b_00_5')]
        out = t.translate(base.HostInventory('cmp-1', [g]), nodename=NODE,
                          root_uuid=ROOT, existing=existing)
        self.assertEqual([NODE + '_pci_0000_3b_00_4',
                          NODE + '_pci_0000_3b_00_5'],
                         out.gpu_providers['0000:3b:00.0'])
        for name in out.gpu_providers['0000:3b:00.0']:
            self.assertIn('CUSTOM_GPU_MODE_VGPU', by_name(out)[name].traits)

    def test_pgpu_of_a_vanished_gpu_wants_no_traits(self):
        existing = [root(), rp(NODE + '_pci_0000_3b_00_0')]
        out = t.translate(base.HostInventory('cmp-1', []), nodename=NODE,
                          root_uuid=ROOT, existing=existing)
        self.assertEqual(frozenset(),
                         by_name(out)[NODE + '_pci_0000_3b_00_0'].traits)
        self.assertEqual(frozenset(), by_name(out)[NODE].traits)

    def test_annotate_never_makes_providers(self):
        out = t.translate(
            base.HostInventory('cmp-1', [gpu(mode='passthrough')]),
            nodename=NODE, root_uuid=ROOT, existing=[root()])
        self.assertEqual([t.KIND_ROOT], [d.kind for d in out.providers])

    def test_unknown_mode(self):
        self.assertRaises(ValueError, t.translate,
                          base.HostInventory('cmp-1', []), nodename=NODE,
                          root_uuid=ROOT, existing=[root()], mode='x')


class TestInventoryMode(testtools.TestCase):

    def translate(self, gpus, existing, reserved=()):
        return t.translate(base.HostInventory('cmp-1', gpus), nodename=NODE,
                           root_uuid=ROOT, existing=[root()] + existing,
                           mode='inventory', reserved_gpus=reserved)

    def test_own_providers_and_reserved(self):
        sick = gpu('0000:3c:00.0', mode='passthrough')
        sick.health.state = 'unhealthy'
        out = self.translate(
            [gpu('0000:3b:00.0', mode='passthrough'), sick,
             gpu('0000:3d:00.0', mode='passthrough'),
             gpu('0000:3e:00.0')],        # vGPU without pGPU: not ours
            [], reserved={'0000:3d:00.0'})
        provs = by_name(out)
        rc = 'CUSTOM_GPU_A100_80GB_PCIE'
        for addr, reserved in (('0000:3b:00.0', 0), ('0000:3c:00.0', 1),
                               ('0000:3d:00.0', 1)):
            d = provs[naming.own_provider_name(NODE, addr)]
            self.assertIsNone(d.uuid)
            self.assertTrue(d.owned)
            self.assertIn(naming.OWNER_TRAIT, d.traits)
            self.assertEqual({rc: {'total': 1, 'reserved': reserved,
                                   'min_unit': 1, 'max_unit': 1,
                                   'step_size': 1,
                                   'allocation_ratio': 1.0}},
                             d.inventories)
        self.assertNotIn(naming.own_provider_name(NODE, '0000:3e:00.0'),
                         provs)

    def test_vanished_gpu(self):
        name = naming.own_provider_name(NODE, '0000:3b:00.0')
        owned = frozenset({naming.OWNER_TRAIT})
        inv = {'CUSTOM_GPU_A100_80GB_PCIE': {'total': 1, 'reserved': 0}}
        unknown = rp(name, traits=owned, inventories=inv)
        out = self.translate([], [unknown])
        self.assertEqual([name], out.need_usage)
        # while usage is unknown, it is reserved (safe), not deleted
        self.assertEqual(1, by_name(out)[name].inventories[
            'CUSTOM_GPU_A100_80GB_PCIE']['reserved'])
        self.assertEqual([], out.delete)
        free = rp(name, traits=owned, inventories=inv, used=False)
        out = self.translate([], [free])
        self.assertEqual([free], out.delete)
        self.assertNotIn(name, by_name(out))
        busy = rp(name, traits=owned, inventories=inv, used=True)
        out = self.translate([], [busy])
        self.assertEqual([], out.delete)
        self.assertEqual(1, by_name(out)[name].inventories[
            'CUSTOM_GPU_A100_80GB_PCIE']['reserved'])
        self.assertEqual(1, len(out.warnings))

    def test_not_ours_is_left_alone(self):
        name = naming.own_provider_name(NODE, '0000:3b:00.0')
        stranger = rp(name, traits=frozenset({'CUSTOM_SOMEONE'}),
                      inventories={}, used=False)
        out = self.translate([gpu(mode='passthrough')], [stranger])
        self.assertNotIn(name, by_name(out))
        self.assertEqual([], out.delete)
        self.assertIn('not ours', out.warnings[0])

    def test_model_change_under_allocation(self):
        name = naming.own_provider_name(NODE, '0000:3b:00.0')
        old = {'CUSTOM_GPU_A100_80GB_PCIE': {'total': 1, 'reserved': 0}}
        existing = rp(name, traits=frozenset({naming.OWNER_TRAIT}),
                      inventories=old, used=True)
        out = self.translate([gpu(mode='passthrough', model='L40S')],
                             [existing])
        invs = by_name(out)[name].inventories
        self.assertEqual({'CUSTOM_GPU_A100_80GB_PCIE': 1,
                          'CUSTOM_GPU_L40S': 1},
                         {rc: i['reserved'] for rc, i in invs.items()})
        existing.used = False
        out = self.translate([gpu(mode='passthrough', model='L40S')],
                             [existing])
        self.assertEqual({'CUSTOM_GPU_L40S'},
                         set(by_name(out)[name].inventories))

    def test_unknown_model_is_warned(self):
        out = self.translate([gpu(mode='passthrough', model=None)], [])
        self.assertEqual([t.KIND_ROOT], [d.kind for d in out.providers])
        self.assertIn('model unknown', out.warnings[0])
