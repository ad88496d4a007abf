# SPDX-License-Identifier: Apache-2.0

"""Nova's own configuration for the simulator's scheduling code.

Nova's options live on the global ``nova.conf.CONF``; :class:`NovaConfig`
sets the scenario's ``nova_conf:`` there as overrides (after the
simulator's defaults: our filters and weighers, PCI in Placement, the
recommended ``[scheduler] max_placement_results``) and clears them when
the simulation ends.  :func:`load_nova` imports Nova once, lazily: the
rest of gpu_nova_ext does not need it.
"""
import functools
import json
from typing import Any
import warnings

from oslo_config import cfg

from gpu_nova_ext import conf as gconf
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.simulate import scenario as scn

NOVA_FILTERS = 'nova.scheduler.filters.all_filters'
GPU_FILTERS = 'gpu_nova_ext.scheduler.filters.all_filters'
NOVA_WEIGHERS = 'nova.scheduler.weights.all_weighers'
GPU_WEIGHERS = 'gpu_nova_ext.scheduler.weighers.all_weighers'
# the order nova-conf writes (gpu-nova-ext nova-conf), read from there
GPU_FILTER_NAMES = list(nova_conf.GPU_FILTERS)
# Nova needs PciPassthroughFilter for flavors with pci_passthrough:alias,
# PCI in Placement or not (nova's PCI passthrough guide).
PCI_FILTER = 'PciPassthroughFilter'


@functools.cache
def load_nova():
    """Import Nova lazily: the rest of gpu_nova_ext does not need it."""
    with warnings.catch_warnings():
        # eventlet, imported by some of Nova's dependencies, warns that it
        # is deprecated; the simulator does not use it.
        warnings.simplefilter('ignore', DeprecationWarning)
        import nova.conf
        from nova import objects
    objects.register_all()
    return nova.conf.CONF


class NovaConfig:
    """The scenario's ``nova_conf:`` applied to Nova's global CONF.

    Defaults added here (each can be overridden by the scenario):

    * ``[filter_scheduler] available_filters``: Nova's and ours;
      ``enabled_filters``: Nova's default list, ``PciPassthroughFilter``
      and every GPU filter; ``weight_classes``: Nova's and ours;
      ``pci_in_placement = True`` (passthrough GPUs are PCI-in-Placement
      providers here);
    * ``[gpu_scheduler] state_listener = False``: the simulator feeds the
      state cache through its own ``fake://`` state server;
    * ``[scheduler] max_placement_results``: what we recommend
      (:mod:`gpu_nova_ext.operator.scale_settings`): Placement's
      ``max_allocation_candidates``, unless the scenario says
      ``placement_conf: stock``.
    """

    def __init__(self, scenario: scn.Scenario,
                 extra_filters: list[str] | tuple = ()):
        self.scenario = scenario
        #: filters the default list gains (the scenario's reservations)
        self.extra_filters = list(extra_filters)
        self.conf = load_nova()
        gconf.register_nova_opts(self.conf)
        self._overrides: list[tuple[str, str | None]] = []

    def apply(self) -> None:
        conf = self.conf
        nova_defaults = list(conf.filter_scheduler.enabled_filters)
        # --compare's "nova" policy: Nova's own filters and weighers only
        ours = getattr(self.scenario, 'gpu_plugins', True)
        defaults = {
            'filter_scheduler': {
                'available_filters': [NOVA_FILTERS, GPU_FILTERS],
                'enabled_filters': (
                    nova_defaults + [PCI_FILTER] +
                    (GPU_FILTER_NAMES if ours else []) +
                    self.extra_filters),
                'weight_classes': [NOVA_WEIGHERS] + (
                    [GPU_WEIGHERS] if ours else []),
                'pci_in_placement': True,
            },
            'gpu_scheduler': {'state_listener': False},
        }
        if getattr(self.scenario, 'recommended', True):
            # what operator/scale_settings.py recommends: Nova's limit is
            # Placement's cap (placement_conf: stock leaves Nova's stock
            # limit)
            cap = self.scenario.placement_conf.get(
                ('placement', 'max_allocation_candidates'), -1)
            if cap > 0:
                defaults.setdefault('scheduler', {})[
                    'max_placement_results'] = cap
        for group, opts in defaults.items():
            for name, value in opts.items():
                self._set(name, value, group)
        for group, opts in self.scenario.nova_conf.items():
            for name, value in opts.items():
                self._set_from_scenario(group, name, value)
        if not ours:
            self._without_ours()
        _clear_nova_caches()

    def _without_ours(self) -> None:
        """--compare nova: our filters and weighers off.

        Even where the scenario's nova_conf (or --nova-conf's file) lists
        them.
        """
        from gpu_nova_ext.scheduler import filters as gpu_filters
        from gpu_nova_ext.scheduler import weighers as gpu_weighers
        ours = {cls.__name__ for cls in gpu_filters.all_filters()}
        fs = self.conf.filter_scheduler
        self._set('enabled_filters', [
            name for name in fs.enabled_filters if name not in ours],
            'filter_scheduler')
        ours_path = gpu_weighers.__name__ + '.'
        self._set('weight_classes', [
            path for path in fs.weight_classes
            if not path.startswith(ours_path)], 'filter_scheduler')

    def set(self, name: str, value: Any, group: str | None) -> None:
        """Override one option until :meth:`restore`."""
        self.conf.set_override(name, value, group)
        self._overrides.append((name, group))

    _set = set

    def _set_from_scenario(self, group: str, name: str, value: Any) -> None:
        entry = 'nova_conf.%s.%s' % (group, name)
        conf_group = None if group == 'DEFAULT' else group
        if group == 'pci' and name in ('alias', 'device_spec'):
            # written as YAML mappings for readability: nova wants JSON
            items = value if isinstance(value, list) else [value]
            value = [v if isinstance(v, str) else json.dumps(v)
                     for v in items]
        try:
            self._set(name, value, conf_group)
            # set_override converts; reading it back checks bounds/choices
            getattr(self.conf if conf_group is None
                    else getattr(self.conf, conf_group), name)
        except (cfg.NoSuchOptError, cfg.NoSuchGroupError):
            raise self.scenario.error(
                entry, 'Nova has no option [%s] %s. Check the group and '
                'option names in nova.conf.sample (or ours in '
                'etc/gpu-nova-ext/nova.conf.sample).' % (group, name))
        except (ValueError, TypeError, cfg.Error) as exc:
            raise self.scenario.error(
                entry, 'bad value %r: %s. Use a value of the option\'s type '
                '(see its help in nova.conf.sample).' % (value, exc))

    def restore(self) -> None:
        for name, group in reversed(self._overrides):
            try:
                self.conf.clear_override(name, group)
            except cfg.Error:
                pass
        self._overrides = []
        _clear_nova_caches()


def _clear_nova_caches() -> None:
    """Forget what Nova memoized from options (as Nova's tests do)."""
    from nova.pci import request as pci_request
    pci_request.get_alias_from_config.cache_clear()
