# SPDX-License-Identifier: Apache-2.0

"""HostInventory records of typical GPU hosts, built by hand."""
from gpu_nova_ext.inventory import base


def passthrough_gpu(address='0000:3b:00.0', driver='550.54.15'):
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='20b5', product_name='NVIDIA A100 80GB PCIe',
        model='A100_80GB_PCIE', memory_mib=81920, cuda_cc='8.0',
        driver_version=driver, mig_capable=True, mig_enabled=False,
        mode='passthrough')


def mdev_gpu(address='0000:84:00.0'):
    """A Tesla T4: mdev types on the physical function."""
    types = [base.MdevType(id='nvidia-222', name='GRID T4-1B', available=16,
                           max=16, parent=address, framebuffer_mib=1024),
             base.MdevType(id='nvidia-223', name='GRID T4-2B', available=8,
                           max=8, parent=address, framebuffer_mib=2048)]
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='1eb8', model='T4', memory_mib=15360, cuda_cc='7.5',
        driver_version='535.104.06', mdev_types=types, mode='vgpu')


def sriov_mdev_gpu(address='0000:85:00.0', nvfs=4):
    """An A100 on an older driver: one mdev instance per VF."""
    vfs = ['0000:85:00.%d' % (i + 4) for i in range(nvfs)]
    types = [base.MdevType(id='nvidia-471', name='A100D-10C', available=1,
                           max=1, parent=vf, framebuffer_mib=10240)
             for vf in vfs]
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='20b5', model='A100_80GB_PCIE', memory_mib=81920,
        cuda_cc='8.0', driver_version='535.104.06', vfs=vfs,
        mdev_types=types, mode='vgpu')


def mig_gpu(address='0000:86:00.0'):
    types = [base.MdevType(id='nvidia-699', name='A100D-1-10C', available=7,
                           max=7, parent=address, framebuffer_mib=9728)]
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='20b5', model='A100_80GB_PCIE', memory_mib=81920,
        cuda_cc='8.0', driver_version='550.54.15', mig_capable=True,
        mig_enabled=True, mdev_types=types)


def vfio_gpu(address='0000:c1:00.0'):
    """An L40S on a 17.x vGPU driver: vendor-specific VFIO vGPU on VFs."""
    vfs = ['0000:c1:00.%d' % (i + 4) for i in range(3)] + ['0000:c1:01.0']
    types = [base.MdevType(id='nvidia-1155', name='L40S-12Q',
                           framebuffer_mib=12288, max=4),
             base.MdevType(id='nvidia-1156', name='L40S-24Q',
                           framebuffer_mib=24576, max=2)]
    return base.Gpu(
        pci_address=address, vendor='nvidia', vendor_id='10de',
        product_id='26b9', model='L40S', memory_mib=46068, cuda_cc='8.9',
        driver_version='570.124.03', vfs=vfs, vfio_vgpu_types=types,
        mode='vgpu-vfio')


def mixed_host():
    return base.HostInventory(host='cmp-1', gpus=[
        vfio_gpu(), passthrough_gpu(), passthrough_gpu('0000:3c:00.0'),
        mdev_gpu(), sriov_mdev_gpu()])
