# SPDX-License-Identifier: Apache-2.0

"""A scenario's ``remediation:`` and a boot's ``metadata:`` as records.

``remediation:`` holds ``[remediation]`` options of ``gpu-nova-ext
remediate`` under the same names; the scenario schema checks them
against the options' own choices and bounds (it reads them from here);
see :mod:`gpu_nova_ext.simulate.remediation` for what the simulator does
with them.
"""
import dataclasses

from gpu_nova_ext.conf import remediation as remediation_conf


def _opt(name: str):
    for opt in remediation_conf.remediation_opts:
        if opt.name == name:
            return opt
    raise KeyError(name)


#: the options' own bounds, which the scenario schema reads
MAX_CONCURRENT = _opt('max_concurrent').type
MAX_CONCURRENT_PER_HOST = _opt('max_concurrent_per_host').type


@dataclasses.dataclass
class Spec:
    """A scenario's ``remediation:``: the ``[remediation]`` options."""

    policy: str = _opt('policy').default
    enabled: bool = True
    max_concurrent: int = _opt('max_concurrent').default
    max_concurrent_per_host: int = _opt('max_concurrent_per_host').default
    passthrough_live_migration: bool = _opt(
        'passthrough_live_migration').default


def parse(item: dict) -> Spec:
    """``remediation:`` (checked by the scenario schema) as a Spec."""
    return Spec(**item)


def parse_metadata(value: dict) -> dict[str, str]:
    """A boot's ``metadata:``: Nova server metadata, strings to strings.

    The scenario schema has checked the types and lengths.
    """
    return {str(key): str(val) for key, val in value.items()}
