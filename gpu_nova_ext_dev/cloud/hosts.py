# SPDX-License-Identifier: Apache-2.0

"""The GPU hosts of the development cloud, described once.

One vGPU host with two A100s, and two passthrough hosts with two L4s each
(at the same PCI addresses, as identical servers have), so that a
passthrough server can be cold-migrated, or resized to two GPUs, onto a
host of its kind.

One description per host feeds both sides of the only stand-in: Nova's
fakelibvirt ``Connection`` that the host's nova-compute process runs on
(:func:`pci_info`), and the libvirt *test driver* XML its gpu-nova-agent
reads (:func:`test_xml`, :func:`gpu_nova_ext_dev.libvirt_hosts.
libvirt_test_xml`).  The NVML side of each GPU (model, memory, health,
metrics) is the agent's ``simulated`` source file (:func:`gpu_facts`).
"""
import copy

from nova.tests.fixtures import libvirt as fakelibvirt

from gpu_nova_ext_dev import libvirt_hosts as base

VGPU_HOST = 'cloud-vgpu'
PCI_HOST = 'cloud-pci'
PCI_HOST_2 = 'cloud-pci-2'
PCI_HOSTS = (PCI_HOST, PCI_HOST_2)

# The two mdev-capable pGPUs fakelibvirt gives a host, both A100 here
PGPU0 = base.PGPU0
PGPU1 = base.PGPU1
# Passthrough GPUs of the PCI host: bus 0x81, slots 0 and 1
L4_0 = '0000:81:00.0'
L4_1 = '0000:81:01.0'
L4_PRODUCT = ('27b8', 'AD104GL [L4]')

HOSTS = {
    VGPU_HOST: {
        'mdev_gpus': 2,
        'gpus': {PGPU0: base.gpu(base.A100), PGPU1: base.gpu(base.A100)},
        # Nova's functional vGPU tests run these versions
        'libvirt_version': 8000000, 'qemu_version': 6002000,
    },
    **{host: {
        'pci_gpus': [L4_PRODUCT, L4_PRODUCT],
        'gpus': {L4_0: base.gpu(base.L4), L4_1: base.gpu(base.L4)},
    } for host in PCI_HOSTS},
}


def description(host: str) -> dict:
    """A copy of ``host``'s description (safe to change and dump)."""
    desc = copy.deepcopy(HOSTS[host])
    desc['host'] = host
    desc['pci_gpus'] = [list(p) for p in desc.get('pci_gpus', ())]
    return desc


def pci_info(desc: dict) -> fakelibvirt.HostPCIDevicesInfo:
    """The host's PCI devices as fakelibvirt gives them to nova-compute."""
    info = fakelibvirt.HostPCIDevicesInfo(
        num_pci=0, num_pfs=0, num_vfs=0,
        num_mdevcap=desc.get('mdev_gpus', 0))
    for slot, (product, name) in enumerate(desc.get('pci_gpus', ())):
        # as the functional harness's PCI-in-Placement host
        info.add_device(
            dev_type='PCI', bus=0x81, slot=slot, function=0,
            iommu_group=40 + slot, numa_node=0, vend_id='10de',
            vend_name='NVIDIA Corporation', prod_id=product,
            prod_name=name, driver_name='vfio-pci')
    return info


def connection(desc: dict, info: fakelibvirt.HostPCIDevicesInfo
               ) -> fakelibvirt.Connection:
    """The fakelibvirt connection of the host's nova-compute."""
    return fakelibvirt.Connection(
        'qemu:///system',
        version=desc.get('libvirt_version',
                         fakelibvirt.FAKE_LIBVIRT_VERSION),
        hv_version=desc.get('qemu_version', fakelibvirt.FAKE_QEMU_VERSION),
        host_info=fakelibvirt.HostInfo(
            cpu_nodes=2, cpu_sockets=1, cpu_cores=2, cpu_threads=2),
        pci_info=info, hostname=desc['host'])


def test_xml(info: fakelibvirt.HostPCIDevicesInfo,
             mdev_info: fakelibvirt.HostMdevDevicesInfo | None = None,
             counted: bool = False) -> str:
    """The same host as a libvirt test-driver XML, for the agent."""
    return base.libvirt_test_xml(info, mdev_info, counted)


def gpu_facts(desc: dict) -> dict:
    """The agent's ``simulated`` source file: NVML facts by PCI address."""
    return desc['gpus']
