# SPDX-License-Identifier: Apache-2.0

"""The ``simulated`` inventory source: GPU facts, metrics and health from
a YAML file, for the simulator and for trying the agent without hardware.

``[agent] simulated_gpus_file`` is a YAML mapping of PCI address to the
GPU's facts (the same shape as a simulator scenario host's ``gpus:``; a
top-level ``gpus:`` key around the mapping is accepted too)::

    "0000:3b:00.0":                     # any PCI address spelling
      name: "NVIDIA A100 80GB PCIe"     # as NVML names it: A100_80GB_PCIE
      memory_mib: 81920
      driver_version: "550.54.15"
      cuda_cc: "8.0"
      uuid: GPU-5c1d...                 # optional
      serial: "1324021012345"           # optional
      vendor: nvidia                    # optional; else from name / libvirt
      numa_node: 0                      # optional; libvirt's wins
      pci_switch: "0000:3a:00.0"        # optional: the PCIe switch above
      nvlink_peers: {"0000:3c:00.0": 12}  # optional: NVLink peer -> links
      mig: {capable: true, enabled: false}   # optional
      slowdown_temperature_c: 87        # optional
      shutdown_temperature_c: 92        # optional
      power_limit_w: 300                # optional
      health: healthy                   # healthy | degraded | unhealthy,
                                        # or {state: degraded, reasons: [..]}
      metrics: {utilization_pct: 10, temperature_c: 40, power_w: 70,
                memory_used_mib: 2048}  # any numeric metrics
      vgpu_types:                       # optional, as NVML would list them
        - {id: nvidia-471, name: A100D-10C, framebuffer_mib: 10240, max: 8}

Every key but the address is optional.  An entry with a wrong type (a
string memory, an unknown health state) is skipped with one warning
naming its address; the rest is read.  A missing or unreadable file is an
error naming the file and the option.
"""
import os
from typing import Any

import yaml

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext import naming
from gpu_nova_ext import safe_yaml

HEALTH_STATES = ('healthy', 'degraded', 'unhealthy')


def _number(value: Any, what: str) -> float | int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError('%s must be a number, got %r' % (what, value))
    return value


def _string(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise ValueError('%s must be a string, got %r' % (what, value))
    return value


def _health(value: Any) -> base.Health:
    if value is None:
        return base.Health()
    if isinstance(value, str):
        state, reasons = value, []
    elif isinstance(value, dict):
        state = value.get('state', 'healthy')
        reasons = value.get('reasons') or []
        if not isinstance(reasons, list):
            raise ValueError('health reasons must be a list')
    else:
        raise ValueError('health must be a state or {state, reasons}')
    if state not in HEALTH_STATES:
        raise ValueError('health %r is not one of %s'
                         % (state, ', '.join(HEALTH_STATES)))
    return base.Health(state=state, reasons=[str(r) for r in reasons])


def _vgpu_types(value: Any) -> list[base.MdevType]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ValueError('vgpu_types must be a list')
    types = []
    for item in value:
        if not isinstance(item, dict) or 'id' not in item:
            raise ValueError('each vgpu_types entry needs an id')
        type_id = item['id']
        if isinstance(type_id, int):
            type_id = naming.nvidia_mdev_type_id(type_id)
        name = naming.vgpu_type_name(_string(item.get('name'), 'name'))
        fb = _number(item.get('framebuffer_mib'), 'framebuffer_mib')
        max_ = _number(item.get('max'), 'max')
        types.append(base.MdevType(
            id=str(type_id), name=name,
            framebuffer_mib=int(fb) if fb is not None else
            naming.vgpu_type_framebuffer_mib(name),
            max=int(max_) if max_ is not None else None,
            available=int(max_ or 0)))
    return types


def _peers(value: Any) -> dict[str, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError('nvlink_peers must map PCI addresses to links')
    out = {}
    for peer, links in value.items():
        count = _number(links, 'nvlink_peers links')
        out[naming.normalize_pci_address(str(peer))] = int(count or 0)
    return out


def gpu_from_entry(address: str, entry: dict) -> base.Gpu:
    """One YAML entry -> a :class:`Gpu`; ValueError names what is wrong."""
    if not isinstance(entry, dict):
        raise ValueError('expected a mapping of facts, got %r' % (entry,))
    name = _string(entry.get('name'), 'name')
    memory = _number(entry.get('memory_mib'), 'memory_mib')
    vendor = _string(entry.get('vendor'), 'vendor')
    if vendor is not None and vendor not in naming.VENDORS:
        raise ValueError('vendor %r is not one of %s'
                         % (vendor, ', '.join(naming.VENDORS)))
    metrics = entry.get('metrics') or {}
    if not isinstance(metrics, dict):
        raise ValueError('metrics must be a mapping')
    for key, value in metrics.items():
        _number(value, 'metric %s' % key)
    mig = entry.get('mig') or {}
    if not isinstance(mig, dict):
        raise ValueError('mig must be {capable, enabled}')
    numa = _number(entry.get('numa_node'), 'numa_node')
    switch = _string(entry.get('pci_switch'), 'pci_switch')
    return base.Gpu(
        pci_address=address,
        vendor=vendor or naming.vendor_from_name(name),
        product_name=name,
        model=(naming.normalize_model(name) or None) if name else None,
        memory_mib=int(memory) if memory is not None else None,
        uuid=_string(entry.get('uuid'), 'uuid'),
        serial=_string(entry.get('serial'), 'serial'),
        numa_node=int(numa) if numa is not None else None,
        pci_switch=(naming.normalize_pci_address(switch)
                    if switch else None),
        nvlink_peers=_peers(entry.get('nvlink_peers')),
        driver_version=_string(entry.get('driver_version'),
                               'driver_version'),
        cuda_cc=_string(entry.get('cuda_cc'), 'cuda_cc'),
        vgpu_types=_vgpu_types(entry.get('vgpu_types')),
        mig_capable=mig.get('capable'),
        mig_enabled=mig.get('enabled'),
        slowdown_temperature_c=_number(entry.get('slowdown_temperature_c'),
                                       'slowdown_temperature_c'),
        shutdown_temperature_c=_number(entry.get('shutdown_temperature_c'),
                                       'shutdown_temperature_c'),
        power_limit_w=_number(entry.get('power_limit_w'), 'power_limit_w'),
        metrics=dict(metrics),
        health=_health(entry.get('health')),
        sources=['simulated'])


class SimulatedSource(base.InventorySource):
    """Facts, metrics and health from ``[agent] simulated_gpus_file``."""

    name = 'simulated'

    def __init__(self, conf, path: str | None = None):
        super().__init__(conf)
        self.path = path or conf.agent.simulated_gpus_file

    def load(self) -> dict:
        if not self.path:
            raise exception.ConfigError(
                reason='the simulated inventory source needs [agent] '
                       'simulated_gpus_file (a YAML file of GPUs by PCI '
                       'address)')
        try:
            with open(os.path.expanduser(self.path), encoding='utf-8') as f:
                data = safe_yaml.load(f)
        except OSError as exc:
            raise exception.InventoryError(
                source=self.name,
                reason='cannot read [agent] simulated_gpus_file %s: %s'
                       % (self.path, exc.strerror or exc))
        except yaml.YAMLError as exc:
            raise exception.InventoryError(
                source=self.name,
                reason='[agent] simulated_gpus_file %s is not valid YAML: '
                       '%s' % (self.path, exc))
        if data is None:
            return {}
        if isinstance(data, dict) and isinstance(data.get('gpus'), dict):
            data = data['gpus']
        if not isinstance(data, dict):
            raise exception.InventoryError(
                source=self.name,
                reason='[agent] simulated_gpus_file %s must be a mapping of '
                       'PCI address to GPU facts' % self.path)
        return data

    def discover(self) -> dict[str, base.Gpu]:
        gpus = {}
        for raw_address, entry in self.load().items():
            try:
                address = naming.normalize_pci_address(str(raw_address))
                gpus[address] = gpu_from_entry(address, entry)
            except ValueError as exc:
                self.warn('Skipping simulated GPU %s in %s: %s.',
                          raw_address, self.path, exc)
        return gpus
