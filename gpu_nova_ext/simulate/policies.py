# SPDX-License-Identifier: Apache-2.0

"""Policies for ``--compare NAME[=FILE_OR_OVERRIDES]``.

A policy is the scenario with some nova.conf options changed:

* a preset by name: ``pack`` (fill GPUs and hosts first), ``spread``
  (spread GPU servers over hosts and GPUs), ``nova`` (Nova's own
  filters and weighers, without ours: see :data:`DESCRIPTIONS` for what
  it cannot honour) and ``frag`` (fragmentation-aware:
  GpuFragmentationWeigher decides, packing breaks its ties);
* ``NAME=FILE``: a YAML file shaped like the scenario's ``nova_conf:``
  (``{group: {option: value}}``);
* ``NAME=group.option=value,group.option=value``: the same inline, each
  value read as a YAML scalar.

Every policy runs the same hosts, steps, workload and seed.
"""
import copy
import os
import re

import yaml

from gpu_nova_ext.simulate import schema

PRESETS = {
    'pack': {'gpu_weights': {'packing_weight_multiplier': -10.0},
             'gpu_scheduler': {'intra_host_policy': 'pack'}},
    'spread': {'gpu_weights': {'packing_weight_multiplier': 10.0},
               'gpu_scheduler': {'intra_host_policy': 'spread'}},
    'nova': {},
    'frag': {'gpu_weights': {'fragmentation_weight_multiplier': 100.0,
                             'packing_weight_multiplier': -10.0},
             'gpu_scheduler': {'intra_host_policy': 'fragmentation'}},
}
#: What each preset does, and cannot do (``--help``, the docs).
DESCRIPTIONS = {
    'pack': 'fill GPUs and hosts first (packing weigher negative, '
            'intra_host_policy pack)',
    'spread': 'spread GPU servers over hosts and GPUs (packing weigher '
              'positive, intra_host_policy spread)',
    'nova': 'Nova\'s own filters and weighers, without ours: it cannot '
            'honour gpu: extra specs (model, vendor, mode, vGPU type, '
            'memory, CUDA capability, driver, health, power profile), so a '
            'flavor whose '
            'resource class several GPU models share may land on the wrong '
            'model; such servers are counted as misplaced, not placed',
    'frag': 'fragmentation-aware: each server where it strands least of '
            'the GPU capacity the expected request mix could use '
            '(fragmentation weigher 100; the packing weigher at -10, as '
            'in pack, breaks its ties; intra_host_policy fragmentation)',
}
#: The preset that runs without our filters and weighers.
NOVA_ONLY = 'nova'
MAX_POLICIES = 8


class PolicyError(ValueError):
    """A bad ``--compare`` argument; the message names it and the fix."""


def parse(arg: str) -> tuple[str, dict, bool]:
    """``(name, nova_conf overrides, with our plugins)`` of one argument."""
    from gpu_nova_ext import safe_yaml
    name, sep, value = arg.partition('=')
    # a policy name is a scenario name (the schema's definition of one)
    rule = schema.definition('name')
    if not re.search(rule['pattern'], name) or len(name) > rule['maxLength']:
        raise PolicyError('--compare %s: %r is not a policy name (letters, '
                          'digits, ".", "_", "-")' % (arg, name))
    if not sep:
        if name not in PRESETS:
            raise PolicyError(
                '--compare %s: no preset of that name (presets: %s); give '
                'NAME=FILE or NAME=group.option=value,...'
                % (arg, ', '.join(PRESETS)))
        return name, copy.deepcopy(PRESETS[name]), name != NOVA_ONLY
    if os.path.isfile(value):
        try:
            with open(value, encoding='utf-8') as f:
                data = safe_yaml.load(f)
        except (OSError, yaml.YAMLError) as exc:
            raise PolicyError('--compare %s: cannot read %s: %s'
                              % (arg, value, exc))
        if not isinstance(data, dict) or not all(
                isinstance(v, dict) for v in data.values()):
            raise PolicyError('--compare %s: %s must map nova.conf groups to '
                              '{option: value}' % (arg, value))
        return name, data, True
    overrides: dict[str, dict] = {}
    for item in value.split(','):
        key, eq, raw = item.partition('=')
        group, dot, option = key.strip().partition('.')
        if not (eq and dot and group and option):
            raise PolicyError(
                '--compare %s: %r is neither a file nor group.option=value '
                '(e.g. gpu_weights.packing_weight_multiplier=10)'
                % (arg, item))
        try:
            parsed = safe_yaml.load(raw) if raw.strip() else ''
        except yaml.YAMLError as exc:
            raise PolicyError('--compare %s: bad value %r: %s'
                              % (arg, raw, exc))
        overrides.setdefault(group, {})[option] = parsed
    return name, overrides, True


def apply(scenario, overrides: dict, gpu_plugins: bool):
    """A copy of ``scenario`` with ``overrides`` on its ``nova_conf``."""
    out = copy.copy(scenario)
    conf = copy.deepcopy(scenario.nova_conf)
    for group, options in overrides.items():
        conf.setdefault(str(group), {}).update(
            {str(k): v for k, v in options.items()})
    schema.validate(conf, scenario.path, key='nova_conf')
    out.nova_conf = conf
    out.gpu_plugins = gpu_plugins
    return out
