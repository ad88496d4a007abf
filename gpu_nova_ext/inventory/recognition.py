# SPDX-License-Identifier: Apache-2.0

"""Which PCI functions are GPUs, and why the others of GPU vendors are not.

Shared by the ``libvirt`` and ``sysfs`` sources.  A PCI function of NVIDIA,
AMD or Intel is a GPU when

* its class is display (0x0300 VGA, 0x0302 3D, 0x0380 other);
* its class is processing accelerator (0x1200) and it is NVIDIA or AMD
  (AMD Instinct MI300X/MI325X/MI308X PFs and VFs report 0x120000), or an
  Intel device of the shipped GPU families (Intel's NPUs are 0x1200 too);
* it reports no class at all (Nova's fake libvirt, some libvirt versions
  for mediated-device parents) and shows GPU evidence: mdev types, or an
  ID of the shipped GPU families (:mod:`gpu_models`);
* ``[agent] extra_gpu_pci_ids`` lists its ``vendor:product``, whatever
  its vendor and class.

An SR-IOV virtual function belongs to its physical function: the sources
fold it into the PF when the PF is a GPU, whatever the VF's own class.
"""
from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext import naming

#: PCI base class/subclass of display controllers
DISPLAY_CLASSES = (0x0300, 0x0302, 0x0380)
VGA_CLASS = 0x0300
#: processing accelerator (PCI base class 0x12, subclass 0x00)
ACCELERATOR_CLASS = 0x1200
#: PCI-to-PCI bridge: a root port or a PCIe switch's port
BRIDGE_CLASS = 0x0604
#: vendors whose accelerator-class functions are GPUs without more evidence
ACCELERATOR_VENDORS = ('10de', '1002')


def why_not_gpu(vendor_id: str | None, product_id: str | None,
                class_code: int | None, has_mdev_types: bool = False,
                extra_ids: frozenset[str] = frozenset()) -> str | None:
    """None for a GPU, else why this function is not one (one phrase)."""
    if '%s:%s' % (vendor_id, product_id) in extra_ids:
        return None
    if vendor_id not in naming.VENDOR_IDS:
        return 'vendor %s is not a GPU vendor' % vendor_id
    known = gpu_models.is_known(vendor_id, product_id)
    if class_code in DISPLAY_CLASSES:
        return None
    if class_code == ACCELERATOR_CLASS:
        if vendor_id in ACCELERATOR_VENDORS or known:
            return None
        return ('processing accelerator (class 0x1200) of an ID outside '
                'the shipped GPU families')
    if class_code is None:
        if has_mdev_types or known:
            return None
        return 'no PCI class, no mdev types and an ID outside the shipped ' \
               'GPU families'
    return 'PCI class 0x%04x is neither display nor accelerator' % class_code


def not_offered_line(functions: list[tuple[str, str, str]]) -> str | None:
    """One INFO text for GPU-vendor functions that are plainly no GPU.

    ``functions``: (address, vendor:product, reason).  Returns None when
    there is none.
    """
    if not functions:
        return None
    return ('%d PCI function(s) of GPU vendors not offered as GPUs: %s; '
            'list vendor:product in [agent] extra_gpu_pci_ids to offer '
            'one.' % (len(functions), ', '.join(
                '%s (%s, %s)' % f for f in sorted(functions))))
