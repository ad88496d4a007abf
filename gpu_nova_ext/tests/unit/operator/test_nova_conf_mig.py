# SPDX-License-Identifier: Apache-2.0

"""nova-conf's mdev types for a GPU laid out by [mig] layouts."""
from oslotest import base as test_base

from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext.inventory import base
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.operator import nova_conf_mig

#: MIG-backed types of an A100 80GB on a vGPU 16.x driver (ids as the
#: driver numbers them: nvidia-699 ... on the VFs)
TYPES = (('nvidia-699', 'A100D-1-10C'), ('nvidia-700', 'A100D-2-20C'),
         ('nvidia-701', 'A100D-3-40C'), ('nvidia-702', 'A100D-4-40C'),
         ('nvidia-703', 'A100D-7-80C'), ('nvidia-707', 'A100D-1-10CME'))


def laid_out_gpu(address='0000:3b:00.0', nvfs=6):
    vfs = ['0000:3b:00.%d' % (i + 4) if i < 4 else '0000:3b:01.%d' % (
        i - 4) for i in range(nvfs)]
    types = [base.MdevType(id=tid, name=name, available=1, max=1,
                           parent=vf)
             for vf in vfs for tid, name in TYPES]
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='20b5', model='A100_80GB_PCIE', memory_mib=81920,
        mig_capable=True, mig_enabled=True, vfs=vfs, mdev_types=types,
        mode='mig-vgpu')


class TestLayoutTypes(test_base.BaseTestCase):

    def test_profile_names(self):
        self.assertEqual('3g.40gb', nova_conf_mig.profile_of_type(
            'NVIDIA A100D-3-40C'))
        self.assertEqual('1g.10gb+me', nova_conf_mig.profile_of_type(
            'A100D-1-10CME'))
        self.assertIsNone(nova_conf_mig.profile_of_type('A100D-10C'))

    def test_drop_in_matches_the_layout(self):
        layout = mig_layout.parse_layout(
            'A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2')
        inventory = base.HostInventory(host='cn1', gpus=[laid_out_gpu()])
        drop = nova_conf.generate(inventory, nova_conf.GeneratorOptions(
            mig_layouts={layout.model: layout.counts}))
        sections = {name: dict(opts) for name, opts in
                    drop.sections.items()}
        self.assertEqual('nvidia-701,nvidia-700,nvidia-699',
                         sections['devices']['enabled_mdev_types'])
        self.assertEqual('0000:3b:00.4', sections['mdev_nvidia-701'][
            'device_addresses'])
        self.assertEqual('0000:3b:00.5', sections['mdev_nvidia-700'][
            'device_addresses'])
        self.assertEqual('0000:3b:00.6,0000:3b:00.7', sections[
            'mdev_nvidia-699']['device_addresses'])
        # a class per size: on this GPU a 1g and a 3g flavor each get
        # their own size, as the simulator's hosts offer them
        self.assertEqual('CUSTOM_VGPU_MIG_1G_10GB',
                         sections['mdev_nvidia-699']['mdev_class'])
        self.assertEqual('CUSTOM_VGPU_MIG_3G_40GB',
                         sections['mdev_nvidia-701']['mdev_class'])

    def test_too_few_parents_and_missing_types_are_said(self):
        gpu = laid_out_gpu(nvfs=2)
        gpu.mdev_types = [t for t in gpu.mdev_types
                          if t.id != 'nvidia-703']
        notes = []
        chosen = nova_conf_mig.layout_types(
            gpu, (('7g.80gb', 1), ('1g.10gb', 3)), notes)
        self.assertEqual({'nvidia-699': ['0000:3b:00.4', '0000:3b:00.5']},
                         chosen)
        self.assertIn('no vGPU type for MIG profile 7g.80gb', notes[0])
        self.assertIn('wants 3 vGPU(s) of type nvidia-699, 2 parent(s)',
                      notes[1])

    def test_gpu_not_laid_out_yet_keeps_its_type(self):
        gpu = base.Gpu(
            pci_address='0000:86:00.0', vendor='nvidia', vendor_id='10de',
            product_id='20b5', model='A100_80GB_PCIE', mig_capable=True,
            mig_enabled=False, mode='vgpu', mdev_types=[base.MdevType(
                id='nvidia-471', name='A100D-10C', available=8, max=8,
                parent='0000:86:00.0')])
        drop = nova_conf.generate(
            base.HostInventory(host='cn1', gpus=[gpu]),
            nova_conf.GeneratorOptions(mig_layouts={
                'A100_80GB_PCIE': (('7g.80gb', 1),)}))
        sections = {name: dict(opts) for name, opts in
                    drop.sections.items()}
        self.assertEqual('nvidia-471',
                         sections['devices']['enabled_mdev_types'])
        self.assertIn('GPU 0000:86:00.0: its MIG layout is not applied yet',
                      ' '.join(drop.notes))
