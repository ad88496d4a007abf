# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""A scenario's ``remediation:`` and a boot's ``metadata:``, checked.

``remediation:`` holds ``[remediation]`` options of ``gpu-nova-ext
remediate`` under the same names, checked against the options' own
choices and bounds; see :mod:`gpu_nova_ext.simulate.remediation` for what
the simulator does with them.
"""
import dataclasses
from typing import Any

from gpu_nova_ext.conf import remediation as remediation_conf
from gpu_nova_ext.simulate import checks

KEYS = ('policy', 'enabled', 'max_concurrent', 'max_concurrent_per_host',
        'passthrough_live_migration')
#: metadata values are strings, as Nova's server metadata
METADATA_MAX = 128


def _opt(name: str):
    for opt in remediation_conf.remediation_opts:
        if opt.name == name:
            return opt
    raise KeyError(name)


@dataclasses.dataclass
class Spec:
    """A scenario's ``remediation:``: the ``[remediation]`` options."""

    policy: str = _opt('policy').default
    enabled: bool = True
    max_concurrent: int = _opt('max_concurrent').default
    max_concurrent_per_host: int = _opt('max_concurrent_per_host').default
    passthrough_live_migration: bool = _opt(
        'passthrough_live_migration').default


def parse(check: checks.Checker, item: Any) -> Spec:
    """``remediation:`` checked against the ``[remediation]`` options."""
    entry = 'remediation'
    item = check.mapping(item, entry)
    check.keys(item, KEYS, entry)
    spec = Spec()
    if 'policy' in item:
        spec.policy = check.choice(item['policy'],
                                   remediation_conf.POLICIES,
                                   entry + '.policy')
    for key in ('enabled', 'passthrough_live_migration'):
        if key in item:
            if not isinstance(item[key], bool):
                raise check.fail('%s.%s' % (entry, key), 'expected true or '
                                 'false, got %s' % checks.kind(item[key]))
            setattr(spec, key, item[key])
    for key in ('max_concurrent', 'max_concurrent_per_host'):
        if key in item:
            bounds = _opt(key).type
            setattr(spec, key, check.integer(
                item[key], '%s.%s' % (entry, key), bounds.min, bounds.max))
    return spec


def parse_metadata(check: checks.Checker, value: Any,
                   entry: str) -> dict[str, str]:
    """A boot's ``metadata:``: Nova server metadata, strings to strings."""
    value = check.mapping(value, entry)
    out = {}
    for key, val in value.items():
        if not isinstance(val, (str, int, float)) or isinstance(val, bool):
            raise check.fail('%s.%s' % (entry, key), 'metadata values are '
                             'strings, got %s' % checks.kind(val))
        key, val = str(key), str(val)
        if len(key) > METADATA_MAX or len(val) > METADATA_MAX:
            raise check.fail('%s.%s' % (entry, key), 'Nova takes metadata '
                             'keys and values of at most %d characters'
                             % METADATA_MAX)
        out[key] = val
    return out
