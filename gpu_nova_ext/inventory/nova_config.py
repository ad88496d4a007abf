# SPDX-License-Identifier: Apache-2.0

"""Which vGPU type nova-compute offers on each GPU, from its nova.conf.

nova-compute's libvirt driver offers vGPUs of ``[devices]
enabled_mdev_types``; with one type it uses it on every GPU that has it,
with several it needs ``[mdev_<type>] device_addresses`` to map each GPU
(or each SR-IOV VF of a GPU) to one type.  We read the same options, from
``[agent] nova_config_file`` then the ``*.conf`` files of
``[agent] nova_config_dir`` in name order (a later file wins, as oslo.config
does), with oslo.config's own INI parser, never registering Nova options.
"""
import dataclasses
import glob
import os

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)


@dataclasses.dataclass
class NovaMdevConfig:
    """nova.conf's vGPU type settings."""

    enabled_types: list[str] = dataclasses.field(default_factory=list)
    #: type id -> PCI addresses (of GPUs or VFs), normalized
    device_addresses: dict[str, list[str]] = dataclasses.field(
        default_factory=dict)
    files: list[str] = dataclasses.field(default_factory=list)
    #: the JSON values of ``[pci] device_spec`` (or the older
    #: ``passthrough_whitelist``): whole devices Nova passes through
    pci_device_specs: list[str] = dataclasses.field(default_factory=list)

    def type_for(self, addresses: list[str]) -> str | None:
        """The type Nova offers on a GPU known by ``addresses`` (PF, VFs).

        None when nova.conf enables no type for it.
        """
        if not self.enabled_types:
            return None
        wanted = set(addresses)
        for type_id in self.enabled_types:
            if wanted.intersection(self.device_addresses.get(type_id, ())):
                return type_id
        if len(self.enabled_types) == 1:
            # One type needs no device_addresses: Nova uses it everywhere.
            type_id = self.enabled_types[0]
            if not self.device_addresses.get(type_id):
                return type_id
        return None


def _values(sections: dict, section: str, key: str) -> list[str] | None:
    values = sections.get(section, {}).get(key)
    if not values:
        return None
    # ListOpt: the last occurrence wins, comma separated.
    return [v.strip() for v in values[-1].split(',') if v.strip()]


def parse_files(paths: list[str]) -> NovaMdevConfig:
    """Read nova.conf files in order; missing files are skipped."""
    result = NovaMdevConfig()
    sections: dict[str, dict[str, list[str]]] = {}
    for path in paths:
        if not os.path.isfile(path):
            continue
        file_sections: dict[str, dict[str, list[str]]] = {}
        try:
            cfg.ConfigParser(path, file_sections).parse()
        except (OSError, cfg.ParseError) as exc:
            LOG.warning('Cannot read nova configuration %s: %s; ignoring '
                        'it for the offered vGPU types.', path, exc)
            continue
        result.files.append(path)
        for section, opts in file_sections.items():
            merged = sections.setdefault(section, {})
            for key, values in opts.items():
                merged[key] = values
    enabled = (_values(sections, 'devices', 'enabled_mdev_types')
               or _values(sections, 'devices', 'enabled_vgpu_types')
               or [])
    result.enabled_types = enabled
    pci = sections.get('pci', {})
    result.pci_device_specs = list(pci.get('device_spec')
                                   or pci.get('passthrough_whitelist') or [])
    for type_id in enabled:
        raw = _values(sections, 'mdev_%s' % type_id, 'device_addresses')
        if not raw:
            raw = _values(sections, 'vgpu_%s' % type_id, 'device_addresses')
        addresses = []
        for addr in raw or []:
            try:
                addresses.append(naming.normalize_pci_address(addr))
            except ValueError:
                LOG.warning('Ignoring %r in [mdev_%s] device_addresses of '
                            '%s: not a PCI address.', addr, type_id,
                            ', '.join(result.files))
        result.device_addresses[type_id] = addresses
    return result


def config_files(conf) -> list[str]:
    """``[agent] nova_config_file`` then the dir's ``*.conf``, in order."""
    paths = []
    if conf.agent.nova_config_file:
        paths.append(conf.agent.nova_config_file)
    if conf.agent.nova_config_dir:
        paths += sorted(glob.glob(os.path.join(conf.agent.nova_config_dir,
                                               '*.conf')))
    return paths


def load(conf) -> NovaMdevConfig:
    """The vGPU settings of this host's nova.conf (empty if none)."""
    return parse_files(config_files(conf))
