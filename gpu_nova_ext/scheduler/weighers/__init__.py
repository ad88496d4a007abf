"""GPU host weighers, one module each, loaded by nova-scheduler.

nova.conf::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
                     gpu_nova_ext.scheduler.weighers.all_weighers
"""
from gpu_nova_ext.scheduler import filters

NAMESPACE = 'gpu_nova_ext.scheduler.weighers'


def all_weighers() -> list[type]:
    """Every class registered in ``gpu_nova_ext.scheduler.weighers``."""
    return filters.load_classes(NAMESPACE)
