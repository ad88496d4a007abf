# SPDX-License-Identifier: Apache-2.0

"""Framebuffer from NVIDIA vGPU type names, every naming form.

The names and sizes are those of NVIDIA's vGPU documentation type tables:
"Virtual GPU Software User Guide" (GRID 8.0, section 1.4.1: Tesla P100
PCIe 12GB/16GB, P100 SXM2, T4, with B-series types carrying a head count,
``P100-2B4``), the NVIDIA vGPU (C-Series) user guide (L4, L40S, A16,
A100 PCIe 80GB, A800: time-sliced and MIG-backed, ``-1-10CME`` with media
extensions) and NVIDIA AI Enterprise's Hopper vGPU type reference (H100
PCIe 80GB, H100 SXM5 80GB/94GB).  Sizes in MiB as the tables give them
(Frame Buffer (Mbytes)); the Hopper tables give GB, the name's number.
"""
import testtools

from gpu_nova_ext import naming

DOC_TYPES = {
    # Tesla P100 PCIe 16GB, 12GB (P100C), SXM2 (P100X): B-series with heads
    'P100-16Q': 16384, 'P100-1Q': 1024, 'P100-2B': 2048, 'P100-2B4': 2048,
    'P100-1B': 1024, 'P100-1B4': 1024, 'P100-16A': 16384, 'P100-1A': 1024,
    'P100C-12Q': 12288, 'P100C-2B4': 2048, 'P100C-1B4': 1024,
    'P100X-2B4': 2048, 'P100X-16A': 16384,
    # Tesla T4
    'T4-16Q': 16384, 'T4-8Q': 8192, 'T4-1Q': 1024, 'T4-2B': 2048,
    'T4-2B4': 2048, 'T4-1B': 1024, 'T4-1B4': 1024, 'T4-16A': 16384,
    'T4-1A': 1024,
    # L4, L40S, A16 (C-Series)
    'L4-24C': 24576, 'L4-12C': 12288, 'L4-4C': 4096,
    'L40S-48C': 49152, 'L40S-24C': 24576, 'L40S-16C': 16384,
    'L40S-4C': 4096,
    'A16-16C': 16384, 'A16-8C': 8192, 'A16-4C': 4096,
    # A100 PCIe 80GB and 40GB: time-sliced and MIG-backed
    'A100D-80C': 81920, 'A100D-16C': 16384, 'A100D-4C': 4096,
    'A100D-7-80C': 81920, 'A100D-3-40C': 40960, 'A100D-1-20C': 20480,
    'A100D-1-10C': 10240, 'A100D-1-10CME': 10240,
    'A100-40C': 40960, 'A100-7-40C': 40960, 'A100-1-5C': 5120,
    'A100-1-5CME': 5120,
    # Ada RTX boards: the board name has a space
    'RTX 6000 Ada-48C': 49152,
    # H100 PCIe 80GB, SXM5 80GB (XM) and 94GB (XL)
    'H100-7-80C': 81920, 'H100-4-40C': 40960, 'H100-1-10C': 10240,
    'H100-1-10CME': 10240, 'H100-40C': 40960, 'H100-8C': 8192,
    'H100XM-7-80C': 81920, 'H100XM-1-20C': 20480, 'H100XM-1-10CME': 10240,
    'H100XL-94C': 96256, 'H100XL-47C': 48128,
    # M60 (the 512 MiB case)
    'M60-0B': 512, 'M60-2B4': 2048,
}

MIG_BACKED = {n for n in DOC_TYPES if n.count('-') == 2}


class TestVgpuTypeFramebuffer(testtools.TestCase):

    def test_every_documented_name(self):
        for name, mib in DOC_TYPES.items():
            self.assertEqual(mib, naming.vgpu_type_framebuffer_mib(name),
                             name)

    def test_as_libvirt_and_nvml_spell_them(self):
        # mdev type names carry a GRID or NVIDIA prefix
        self.assertEqual(2048, naming.vgpu_type_framebuffer_mib(
            'GRID P100-2B4'))
        self.assertEqual(1024, naming.vgpu_type_framebuffer_mib(
            'GRID T4-1B4'))
        self.assertEqual(10240, naming.vgpu_type_framebuffer_mib(
            'NVIDIA A100D-1-10CME'))

    def test_mig_backed(self):
        for name in DOC_TYPES:
            self.assertEqual(name in MIG_BACKED,
                             naming.is_mig_backed_vgpu_type(name), name)

    def test_unknown_shapes(self):
        # "H100-80" is a misprint in NVIDIA's table: no series letter
        for name in ('H100-80', 'weird', '', None, 'A100-1-5Cxx'):
            self.assertIsNone(naming.vgpu_type_framebuffer_mib(name), name)
