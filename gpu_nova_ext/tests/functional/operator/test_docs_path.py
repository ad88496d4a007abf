# SPDX-License-Identifier: Apache-2.0

"""The documented path, end to end, in Nova's functional harness.

doc/source/flavors.rst "From nothing to a scheduled GPU server": discover
the host and generate its nova.conf drop-in with ``nova-conf``'s
generator, give those options to nova-compute, run the agent, create the
flavor with ``openstack gpu flavor create`` (python-openstackclient
against Nova's API), boot: the server lands on the GPU the flavor asks for.
"""
from nova import conf as nova_conf_mod
from nova.tests.fixtures import libvirt as fakelibvirt

from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional import osc_client

CONF = nova_conf_mod.CONF

# NVML's names for fakelibvirt's two types on each model
A100 = base.gpu(base.A100, vgpu_types=[
    {'id': fakelibvirt.NVIDIA_11_VGPU_TYPE, 'name': 'A100D-5C',
     'framebuffer_mib': 5120, 'max': 16},
    {'id': fakelibvirt.NVIDIA_12_VGPU_TYPE, 'name': 'A100D-10C',
     'framebuffer_mib': 10240, 'max': 8}])
L4 = base.gpu(base.L4, vgpu_types=[
    {'id': fakelibvirt.NVIDIA_11_VGPU_TYPE, 'name': 'L4-1B',
     'framebuffer_mib': 1024, 'max': 16},
    {'id': fakelibvirt.NVIDIA_12_VGPU_TYPE, 'name': 'L4-2B',
     'framebuffer_mib': 2048, 'max': 8}])


class DocumentedPathTest(base.GpuVGPUTestBase):

    def _apply_drop_in(self, drop):
        """Give nova-compute the drop-in's options (as nova.conf.d would)."""
        types = drop.values('devices', 'enabled_mdev_types')[0].split(',')
        self.flags(enabled_mdev_types=types, group='devices')
        nova_conf_mod.devices.register_dynamic_opts(CONF)
        agent_view = {'devices': {'enabled_mdev_types': ','.join(types)}}
        for mtype in types:
            group = 'mdev_%s' % mtype
            addresses = drop.values(group, 'device_addresses')[0]
            self.flags(device_addresses=addresses.split(','), group=group)
            opts = {'device_addresses': addresses}
            for value in drop.values(group, 'mdev_class'):
                self.flags(mdev_class=value, group=group)
                opts['mdev_class'] = value
            for value in drop.values(group, 'max_instances'):
                self.flags(max_instances=int(value), group=group)
                opts['max_instances'] = value
            agent_view[group] = opts
        return agent_view

    def _flavor_create(self, argv):
        self.useFixture(osc_client.Cloud.of_harness(self))
        made = osc_client.openstack_json(self, 'gpu', 'flavor', 'create',
                                         *argv)
        return made['id']

    def test_nova_conf_agent_flavor_boot(self):
        host = 'host1'
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=2,
            multiple_gpu_types=True)
        self.pci_infos[host] = pci_info
        self.gpu_facts[host] = {base.PGPU0: A100, base.PGPU1: L4}

        # 1. gpu-nova-ext nova-conf --vgpu-type A100D-10C --vgpu-type L4-1B
        self._write_agent_files(host)
        inventory = manager.discover(self.agent_conf(host))
        drop = nova_conf.generate(inventory, nova_conf.GeneratorOptions(
            vgpu_types=('A100D-10C', 'L4-1B')))
        self.assertEqual(
            [fakelibvirt.NVIDIA_12_VGPU_TYPE + ',' +
             fakelibvirt.NVIDIA_11_VGPU_TYPE],
            drop.values('devices', 'enabled_mdev_types'))
        # the scheduler part is what this harness's scheduler runs
        enabled = drop.values('filter_scheduler',
                              'enabled_filters')[0].split(',')
        self.assertEqual(base.GPU_FILTERS, enabled[-len(base.GPU_FILTERS):])

        # 2. restart nova-compute with it; start the agent
        self.agent_nova_conf[host] = self._apply_drop_in(drop)
        self.start_compute_with_vgpu(host, pci_info)
        state = self.run_agent(host)
        self.assertEqual(
            {base.PGPU0: fakelibvirt.NVIDIA_12_VGPU_TYPE,
             base.PGPU1: fakelibvirt.NVIDIA_11_VGPU_TYPE},
            {g['pci_address']: g['offered_vgpu_type']
             for g in state['gpus']})

        # 3. openstack gpu flavor create (the type by id: fakelibvirt names
        # every type "M60-0B", and libvirt's name wins in the state)
        flavor = self._flavor_create(
            ['vgpu.a100', '--model', 'A100_80GB_PCIE', '--vgpu-type',
             fakelibvirt.NVIDIA_12_VGPU_TYPE,
             '--memory-min', '10GB', '--vcpus', '1', '--ram', '512',
             '--disk', '1'])
        small = self._flavor_create(
            ['vgpu.small', '--model', 'L4', '--memory-min', '1GB',
             '--vcpus', '1', '--ram', '512', '--disk', '1'])

        # 4. boot: each lands on the GPU its flavor asks for
        server = self._create_server(image_uuid=base.IMAGE,
                                     flavor_id=flavor, networks='none')
        self.assertEqual((host, self.pgpu(host, base.PGPU0)),
                         self.gpu_of(server))
        self.run_agent(host)
        server = self._create_server(image_uuid=base.IMAGE,
                                     flavor_id=small, networks='none')
        self.assertEqual((host, self.pgpu(host, base.PGPU1)),
                         self.gpu_of(server))
