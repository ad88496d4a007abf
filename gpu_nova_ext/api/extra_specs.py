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

"""nova-api validators for the ``gpu:`` flavor extra specs.

See the design doc (doc/source/contributor): Flavor extra specs.

Loaded by nova-api through the ``nova.api.extra_spec_validators`` entry
point ``gpu``.  With microversion 2.86 or later nova-api then rejects a
``gpu:`` key that is not listed here and a value that the scheduler's
parser (:mod:`gpu_nova_ext.scheduler.request`) would not accept, with a
message naming the key, the value and what is allowed.

Each validator runs the scheduler's own parser, the one rule for a value
(so the API and the filters can never disagree: ``NVIDIA`` or
``degraded_ok `` is refused by both), and carries Nova's ``value`` schema
(``pattern`` or ``enum``, which Nova's API reference renders).  Keys in a
misspelt namespace (``GPU:model``, `` gpu:model``), which the scheduler
would refuse too, are rejected with the right spelling.
"""
import dataclasses
import typing as ty

from nova.api.validation.extra_specs import base
from nova import exception

from gpu_nova_ext import naming
from gpu_nova_ext.scheduler import request

_MODEL = r'[A-Za-z0-9][A-Za-z0-9 _.\-]*'
_VGPU_TYPE = r'[A-Za-z0-9][A-Za-z0-9_.\-]*'


@dataclasses.dataclass
class GpuExtraSpecValidator(base.ExtraSpecValidator):
    """An ExtraSpecValidator whose errors name key, value and fix."""

    parser: ty.Callable[[str], ty.Any] | None = None
    allowed: str = ''

    def validate(self, name, value):
        right = request.misspelt(name)
        if right is not None:
            raise exception.ValidationError(detail=(
                "Validation failed; extra spec '%s' is in a misspelt gpu: "
                "namespace: write '%s'." % (name, right)))
        if self.parser is None:
            # the catch-all for unknown gpu: keys
            raise exception.ValidationError(detail=(
                "Validation failed; extra spec '%s' is not a known gpu: "
                "extra spec. Known keys: %s." % (
                    name, ', '.join(sorted(request.KEYS)))))
        try:
            self.parser(value)
            # Nova's own schema check as well (pattern/enum)
            super().validate(name, value)
        except (ValueError, TypeError, exception.ValidationError):
            raise exception.ValidationError(detail=(
                "Validation failed; invalid value %r for extra spec '%s'. "
                "Allowed: %s." % (value, name, self.allowed)))


def _v(name: str, description: str, value: dict,
       parser: ty.Callable[[str], ty.Any], allowed: str
       ) -> GpuExtraSpecValidator:
    return GpuExtraSpecValidator(name=name, description=description,
                                 value=value, parser=parser, allowed=allowed)


def _enum(values: tuple[str, ...]) -> dict:
    return {'type': str, 'enum': list(values)}


VALIDATORS = [
    _v('gpu:model',
       'GPU models the server may get, comma-separated. A value matches a '
       'normalized model (as in CUSTOM_GPU_MODEL_<M> traits) equal to it or '
       'starting with it at a "_" boundary: A100 matches A100_80GB_PCIE.',
       {'type': str, 'pattern': r'\s*%s\s*(,\s*%s\s*)*' % (_MODEL, _MODEL),
        'description': 'comma-separated GPU models'},
       request.parse_models,
       'a comma-separated list of GPU models such as A100 or '
       'A100_80GB_PCIE'),
    _v('gpu:vendor',
       'GPU vendor the server must get.',
       _enum(naming.VENDORS),
       request.parse_vendor, 'nvidia, amd or intel'),
    _v('gpu:mode',
       'How the GPU is offered: vgpu (a mediated device or vendor VFIO '
       'vGPU) or passthrough (a whole PCI function).',
       _enum(request.MODES),
       request.parse_mode, 'vgpu or passthrough'),
    _v('gpu:vgpu_type',
       'mdev type ids or names the vGPU may be of, comma-separated '
       '(nvidia-471, A100D-10C).',
       {'type': str,
        'pattern': r'\s*%s\s*(,\s*%s\s*)*' % (_VGPU_TYPE, _VGPU_TYPE)},
       request.parse_vgpu_types,
       'a comma-separated list of mdev type ids or names such as '
       'nvidia-471 or A100D-10C'),
    _v('gpu:memory_min',
       'Least memory per GPU; for a vGPU the framebuffer of its type. An '
       'integer number of MiB, or with a unit MB, MiB, GB or GiB.',
       {'type': str,
        'pattern': r'\s*\d+\s*([Mm][Bb]|[Mm][Ii][Bb]|[Gg][Bb]|[Gg][Ii][Bb])?'
                   r'\s*'},
       request.parse_memory,
       'an integer number of MiB, or with a unit MB, MiB, GB or GiB '
       '(e.g. 16384 or 16GB)'),
    _v('gpu:cuda_cc_min',
       'Least CUDA compute capability, X.Y.',
       {'type': str, 'pattern': r'\s*\d+\.\d+\s*'},
       request.parse_cuda_cc, 'a compute capability X.Y such as 8.0'),
    _v('gpu:driver_min',
       'Least GPU driver version, compared numerically part by part.',
       {'type': str, 'pattern': r'\s*\d+(\.\d+){0,3}\s*'},
       request.parse_driver, 'a dotted driver version such as 550.54.15'),
    _v('gpu:health',
       'GPU health the server accepts: healthy (the default), degraded_ok '
       '(degraded GPUs too) or any.',
       _enum(request.HEALTH_POLICIES),
       request.parse_health, 'healthy, degraded_ok or any'),
    _v('gpu:intra_host_policy',
       'Which GPU of the chosen host the server gets: pack (least free '
       'capacity left), spread (most), coolest, least_loaded or '
       'fragmentation (the GPU whose use fragments the host least). '
       'Overrides [gpu_scheduler] intra_host_policy.',
       _enum(request.POLICIES),
       request.parse_policy,
       'pack, spread, coolest, least_loaded or fragmentation'),
    _v('gpu:power_profile',
       'The power profile the GPU must run under ([power] profiles of the '
       'agents): max-performance, balanced, efficiency, or a limit such as '
       '250W or 80% exactly as the agents are configured.',
       {'type': str, 'pattern': request.schema.POWER_PROFILE_PATTERN[1:-1],
        'description': 'a power profile'},
       request.parse_power_profile,
       'max-performance, balanced, efficiency, or a limit such as 250W or '
       '80%'),
]

# Nova looks a key up by exact name first, so this only meets unknown keys.
UNKNOWN = GpuExtraSpecValidator(
    name='gpu:{key}',
    description='Any other gpu: key is rejected.',
    value={'type': str},
    parameters=[{'name': 'key', 'pattern': r'.*',
                 'description': 'an unknown key'}],
    parser=None)


# Keys in a namespace that is gpu but for case or blanks; Nova tries
# validators in order, so the right namespace never gets here.
MISSPELT = GpuExtraSpecValidator(
    name='{namespace}:{key}',
    description='A gpu: key in a misspelt namespace (GPU:, Gpu:, " gpu:") '
                'is rejected with the right spelling.',
    value={'type': str},
    parameters=[{'name': 'namespace', 'pattern': r'\s*[gG][pP][uU]\s*',
                 'description': 'gpu, misspelt'},
                {'name': 'key', 'pattern': r'.*',
                 'description': 'any key'}],
    parser=None)


def register() -> list[base.ExtraSpecValidator]:
    """Nova's entry point: the validators of the ``gpu`` namespace."""
    return VALIDATORS + [UNKNOWN, MISSPELT]
