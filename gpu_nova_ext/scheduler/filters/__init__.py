# SPDX-License-Identifier: Apache-2.0

"""GPU host filters, loaded by nova-scheduler (doc/source/nova-config)."""
from stevedore import extension

from gpu_nova_ext import exception

NAMESPACE = 'gpu_nova_ext.scheduler.filters'


def load_classes(namespace: str) -> list[type]:
    """Classes registered under a stevedore namespace, sorted by name.

    A plugin that fails to load raises PluginLoadError naming it.
    """
    def _failed(manager, entry_point, err):
        raise exception.PluginLoadError(
            namespace=namespace, name=entry_point.name, reason=err,
            available=', '.join(sorted(
                ep.name for ep in manager.list_entry_points())))

    mgr = extension.ExtensionManager(
        namespace, invoke_on_load=False,
        on_load_failure_callback=_failed)
    return [ext.plugin for ext in sorted(mgr, key=lambda e: e.name)]


def all_filters() -> list[type]:
    """Every filter class registered in ``gpu_nova_ext.scheduler.filters``."""
    return load_classes(NAMESPACE)
