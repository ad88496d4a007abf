# SPDX-License-Identifier: Apache-2.0

"""Discovery entry point: load the configured sources, merge, classify.

::

    from gpu_nova_ext.inventory import manager
    inventory = manager.discover(conf)   # [agent] inventory_sources
    inventory = manager.discover(conf, sources=['nvml'])

``conf`` has :func:`gpu_nova_ext.conf.register_agent_opts` applied.
Sources are the ``gpu_nova_ext.inventory.sources`` stevedore plugins; a
name that is not installed raises :class:`exception.PluginLoadError`
listing the installed ones.  An unreachable libvirt raises
:class:`exception.LibvirtUnavailable`; NVML missing is a warning.
"""
import importlib.metadata

from oslo_log import log as logging
import stevedore

from gpu_nova_ext import exception
from gpu_nova_ext.inventory import base
from gpu_nova_ext.inventory import merge
from gpu_nova_ext.inventory import nova_config

LOG = logging.getLogger(__name__)

NAMESPACE = 'gpu_nova_ext.inventory.sources'

# Source classes already loaded by name: an agent discovers every cycle,
# scanning entry points each time would cost more than the discovery.
_CLASSES: dict[str, type] = {}


def installed_sources() -> list[str]:
    """Names of the installed inventory source plugins."""
    return sorted({ep.name for ep in
                   importlib.metadata.entry_points(group=NAMESPACE)})


def _source_class(name: str) -> type:
    cls = _CLASSES.get(name)
    if cls is not None:
        return cls

    def failed(_manager, entrypoint, exc):
        raise exception.PluginLoadError(
            namespace=NAMESPACE, name=entrypoint.name, reason=exc,
            available=', '.join(installed_sources()))

    try:
        mgr = stevedore.DriverManager(
            NAMESPACE, name, invoke_on_load=False,
            on_load_failure_callback=failed)
    except stevedore.exception.NoMatches:
        raise exception.PluginLoadError(
            namespace=NAMESPACE, name=name,
            reason='no such inventory source',
            available=', '.join(installed_sources()) or 'none')
    cls = mgr.driver
    if not (isinstance(cls, type) and issubclass(cls, base.InventorySource)):
        raise exception.PluginLoadError(
            namespace=NAMESPACE, name=name,
            reason='%r is not an InventorySource' % (cls,),
            available=', '.join(installed_sources()))
    _CLASSES[name] = cls
    return cls


def load_sources(conf, names: list[str]) -> list[base.InventorySource]:
    """Instantiate the named sources (all names checked first)."""
    classes = [_source_class(name) for name in names]
    return [cls(conf) for cls in classes]


def discover(conf, sources: list[str] | None = None,
             host: str | None = None) -> base.HostInventory:
    """Discover this host's GPUs: one :class:`HostInventory`.

    ``sources`` defaults to ``[agent] inventory_sources`` and ``host`` to
    ``[DEFAULT] host``.  Sources are merged by PCI address in the given
    order; each GPU gets its offering mode and offered vGPU type (from the
    nova.conf at ``[agent] nova_config_file``, else its existing mdevs).
    Devices a source had to skip or degrade are in ``warnings``;
    GPU-vendor devices not offered as GPUs, with why, in ``notes``.
    """
    names = list(conf.agent.inventory_sources if sources is None
                 else sources)
    plugins = load_sources(conf, names)
    warnings: list[str] = []
    notes: list[str] = []

    def warn(msg, *args):
        warnings.append(base.log_once(msg, *args))

    reports = []
    try:
        for name, plugin in zip(names, plugins):
            gpus = plugin.discover()
            warnings.extend(plugin.warnings)
            notes.extend(plugin.notes)
            reports.append((name, gpus))
    finally:
        for plugin in plugins:
            plugin.close()
    inventory = merge.merge(reports, host or conf.host, warn=warn)
    merge.classify(inventory, nova_config.load(conf), warn=warn)
    inventory.warnings = warnings
    inventory.notes = notes
    return inventory
