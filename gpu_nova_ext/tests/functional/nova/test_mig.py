# SPDX-License-Identifier: Apache-2.0

"""A MIG layout end to end in Nova's harness.

Two A100 80GB on one host, offering a time-sliced vGPU type; a server
runs on one.  ``[mig] layouts = A100_80GB_PCIE:3g.40gb=2``: the agent
lays out the free GPU through NVML (the fake NVML: MIG mode, two GPU
instances) and leaves the busy one alone.  The NVIDIA driver then offers
the MIG-backed type on the laid-out GPU; this test plays that part (it
updates the GPU's vGPU types as NVML lists them, and fakelibvirt's
nvidia-12 stands for ``A100D-3-40C``).  ``gpu-nova-ext nova-conf`` writes
the mdev type for the layout, nova-compute restarts with it, the agent
reports, and a server asking 40 GiB of vGPU memory (only the MIG-backed
type has it) boots on the laid-out GPU.
"""
from nova.tests.fixtures import libvirt as fakelibvirt

from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import nova_conf as nova_conf_gen
from gpu_nova_ext.tests.functional.nova import base

LAYOUT = 'A100_80GB_PCIE:3g.40gb=2'
TIME_SLICED = [{'id': fakelibvirt.NVIDIA_11_VGPU_TYPE, 'name': 'A100D-5C',
                'framebuffer_mib': 5120, 'max': 16}]
# what the driver lists on a GPU with two 3g.40gb instances
MIG_BACKED = [{'id': fakelibvirt.NVIDIA_12_VGPU_TYPE, 'name': 'A100D-3-40C',
               'framebuffer_mib': 40960, 'max': 2}]
VGPU = {'resources:VGPU': '1'}


class MigLayoutTest(base.GpuVGPUTestBase):

    def setUp(self):
        super().setUp()
        self.nvml = self.useFixture(fake_nvml.FakeNvml([
            fake_nvml.DeviceSpec('A100_80GB_PCIE', pci_address=address)
            for address in (base.PGPU0, base.PGPU1)]))
        a100 = base.gpu(base.A100, vgpu_types=TIME_SLICED,
                        mig={'capable': True, 'enabled': False})
        self.start_gpu_host(
            'host1', {base.PGPU0: a100, base.PGPU1: dict(a100)},
            multiple_gpu_types=True,
            mdev_types={base.PGPU0: fakelibvirt.NVIDIA_11_VGPU_TYPE,
                        base.PGPU1: fakelibvirt.NVIDIA_11_VGPU_TYPE})

    def agent_conf(self, host):
        conf = super().agent_conf(host)
        conf.set_override('layouts', [LAYOUT], group='mig')
        return conf

    def test_boot_on_the_mig_backed_type_the_agent_made(self):
        busy = self.boot(dict(VGPU, **{'gpu:model': 'A100'}))
        busy_host, busy_rp = self.gpu_of(busy)
        busy_address = (base.PGPU0 if busy_rp == self.pgpu(
            'host1', base.PGPU0) else base.PGPU1)
        free_address = ({base.PGPU0, base.PGPU1} - {busy_address}).pop()
        self.run_agent('host1')

        # the agent's MIG step (as its daemon runs after each report)
        agent = self._agent('host1')
        self.assertTrue(agent.mig.cycle(agent.last_inventory, agent.client))
        busy_dev = self.nvml.device(busy_address)
        free_dev = self.nvml.device(free_address)
        self.assertEqual((0, 0), (busy_dev.mig_current, busy_dev.mig_pending))
        self.assertEqual([], self.nvml.gpu_instances(busy_address))
        self.assertEqual(1, free_dev.mig_current)
        self.assertEqual([('3g.40gb', 0), ('3g.40gb', 4)],
                         self.nvml.gpu_instances(free_address))
        blocked = {o.plan.pci_address: o.plan.blocked
                   for o in agent.mig.last}
        self.assertIn('holds allocations in Placement', blocked[
            busy_address][0])

        # the driver offers the MIG-backed type on the laid-out GPU
        self.gpu_facts['host1'][free_address] = base.gpu(
            base.A100, vgpu_types=MIG_BACKED,
            mig={'capable': True, 'enabled': True})
        self._write_agent_files('host1')
        options = nova_conf_gen.GeneratorOptions(
            vgpu_class='vgpu', mig_layouts={'A100_80GB_PCIE': (
                ('3g.40gb', 2),)})
        drop = nova_conf_gen.generate(
            manager.discover(self.agent_conf('host1')), options)
        sections = {name: dict(opts) for name, opts in drop.sections.items()}
        mdev = 'mdev_%s' % fakelibvirt.NVIDIA_12_VGPU_TYPE
        self.assertEqual(free_address, sections[mdev]['device_addresses'])
        self.assertEqual(
            busy_address, sections['mdev_%s' % fakelibvirt.
                                   NVIDIA_11_VGPU_TYPE]['device_addresses'])
        self.agent_nova_conf['host1'] = self._mdev_flags({
            busy_address: fakelibvirt.NVIDIA_11_VGPU_TYPE,
            free_address: fakelibvirt.NVIDIA_12_VGPU_TYPE})
        self.restart_compute_service('host1')
        payload = self.run_agent('host1')
        laid_out = [g for g in payload['gpus']
                    if g['pci_address'] == free_address][0]
        self.assertEqual(fakelibvirt.NVIDIA_12_VGPU_TYPE,
                         laid_out['offered_vgpu_type'])
        self.assertEqual({'capable': True, 'enabled': True},
                         laid_out['mig'])

        # only the MIG-backed type has 40 GiB (fakelibvirt names its
        # types after an M60, so the request asks by framebuffer)
        server = self.boot(dict(VGPU, **{'gpu:memory_min': '40GiB'}))
        self.assertEqual(('host1', self.pgpu('host1', free_address)),
                         self.gpu_of(server))
        self.assertEqual((busy_host, busy_rp), self.gpu_of(busy))
