# SPDX-License-Identifier: Apache-2.0

"""GPU host weighers, loaded by nova-scheduler (doc/source/nova-config)."""
from gpu_nova_ext.scheduler import filters

NAMESPACE = 'gpu_nova_ext.scheduler.weighers'


def all_weighers() -> list[type]:
    """Every class registered in ``gpu_nova_ext.scheduler.weighers``."""
    return filters.load_classes(NAMESPACE)
