"""Shipped PCI ID -> GPU model table, used when NVML is absent.

The models are spelled as :func:`gpu_nova_ext.naming.normalize_model`
spells the NVML name of the same board, so a GPU gets the same
``CUSTOM_GPU_MODEL_*`` trait with or without NVML (``20b5`` is NVML's
"NVIDIA A100 80GB PCIe" -> ``A100_80GB_PCIE``; NVML calls a T4 "Tesla T4").
AMD and Intel boards have no NVML: their models are the short marketing
names (``MI210``, ``FLEX_170``).

IDs whose board cannot be told from the device ID alone (``10de:25b6`` is
an A2 or an A16) are left out on purpose: the libvirt product string is
used instead (see :func:`model_from_product`).
"""
import re

from gpu_nova_ext import naming

#: (vendor_id, device_id), lower-case hex without 0x -> normalized model
PCI_MODELS: dict[tuple[str, str], str] = {
    # NVIDIA Volta / Turing
    ('10de', '1db1'): 'TESLA_V100_SXM2_16GB',
    ('10de', '1db4'): 'TESLA_V100_PCIE_16GB',
    ('10de', '1db5'): 'TESLA_V100_SXM2_32GB',
    ('10de', '1db6'): 'TESLA_V100_PCIE_32GB',
    ('10de', '1eb8'): 'TESLA_T4',
    # NVIDIA Ampere
    ('10de', '20b0'): 'A100_SXM4_40GB',
    ('10de', '20b1'): 'A100_PCIE_40GB',
    ('10de', '20f1'): 'A100_PCIE_40GB',
    ('10de', '20b2'): 'A100_SXM4_80GB',
    ('10de', '20b5'): 'A100_80GB_PCIE',
    ('10de', '20b7'): 'A30',
    ('10de', '2230'): 'RTX_A6000',
    ('10de', '2235'): 'A40',
    ('10de', '2236'): 'A10',
    ('10de', '2237'): 'A10G',
    # NVIDIA Hopper
    ('10de', '2330'): 'H100_80GB_HBM3',
    ('10de', '2331'): 'H100_PCIE',
    ('10de', '2321'): 'H100_NVL',
    ('10de', '2335'): 'H200',
    ('10de', '233b'): 'H200_NVL',
    # NVIDIA Ada Lovelace
    ('10de', '26b1'): 'RTX_6000_ADA_GENERATION',
    ('10de', '26b5'): 'L40',
    ('10de', '26b9'): 'L40S',
    ('10de', '27b8'): 'L4',
    # NVIDIA Blackwell
    ('10de', '2901'): 'B200',
    # AMD Instinct
    ('1002', '738c'): 'MI100',
    ('1002', '7408'): 'MI250X',
    ('1002', '740c'): 'MI250',
    ('1002', '740f'): 'MI210',
    ('1002', '74a0'): 'MI300A',
    ('1002', '74a1'): 'MI300X',
    # Intel Data Center GPU Flex / Max
    ('8086', '56c0'): 'FLEX_170',
    ('8086', '56c1'): 'FLEX_140',
    ('8086', '0bd5'): 'MAX_1550',
    ('8086', '0bd6'): 'MAX_1550',
    ('8086', '0bd7'): 'MAX_1350',
    ('8086', '0bd8'): 'MAX_1350',
    ('8086', '0bd9'): 'MAX_1100',
    ('8086', '0bda'): 'MAX_1100',
    ('8086', '0bdb'): 'MAX_1100',
}

_BRACKETED = re.compile(r'\[([^\]]+)\]')


def _hex(value: str | None) -> str:
    if not value:
        return ''
    value = value.strip().lower()
    if value.startswith('0x'):
        value = value[2:]
    return value.zfill(4)


def model_for(vendor_id: str | None, product_id: str | None) -> str | None:
    """The shipped model of a PCI ID, or None when the table lacks it."""
    return PCI_MODELS.get((_hex(vendor_id), _hex(product_id)))


def model_from_product(product: str | None) -> str | None:
    """Model from a libvirt/pci.ids product string, the last resort.

    The bracketed marketing name wins when there is one:
    ``"GA107GL [A2 / A16]"`` -> ``A2_A16``; otherwise the whole string.
    """
    if not product:
        return None
    m = _BRACKETED.search(product)
    model = naming.normalize_model(m.group(1) if m else product)
    return model or None
