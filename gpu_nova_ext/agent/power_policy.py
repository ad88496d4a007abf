# SPDX-License-Identifier: Apache-2.0

"""The power policy of ``[power] profiles``: parse, check, apply.

A profile turns into a power limit from the board's default limit and
its allowed range: NVIDIA through NVML (``nvmlDeviceGetPowerManagement
DefaultLimit``, ``...LimitConstraints``, ``...Limit`` and
``nvmlDeviceSetPowerManagementLimit``, milliwatts), AMD through the
kernel's amdgpu hwmon (``power1_cap_default``, ``power1_cap_min``,
``power1_cap_max``, ``power1_cap``, microwatts).  Limits are read here
and set by the privsep daemon (:mod:`gpu_nova_ext.privsep.gpu`: NVML and
the kernel refuse them to the unprivileged agent).  :meth:`PowerPolicy.apply`
runs at every agent cycle and sets a limit only where it differs, so a
driver reload (limits back to their defaults) is undone at the next
cycle.  Each GPU's ``power_profile`` goes into the GPU state.
"""
import dataclasses
import glob
import os
import re

from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext.privsep import gpu as privileged
from gpu_nova_ext.state import schema

LOG = logging.getLogger(__name__)

OPTION = ('power', 'profiles')
#: fraction of the default limit of the named profiles (max-performance
#: is the board's highest allowed limit)
FRACTIONS = {'balanced': 0.85, 'efficiency': 0.70}
MIN_PERCENT, MAX_PERCENT = 10, 100
#: watts any board's limit lies within (a typo like 25000W is refused)
MIN_WATTS, MAX_WATTS = 10, 2000
_VALUE = re.compile(r'^(\d+(?:\.\d+)?)\s*(W|%)$', re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class Profile:
    name: str                      # as the state reports it
    watts: float | None = None     # explicit limit
    percent: float | None = None   # of the default limit

    def limit_w(self, default_w: float, min_w: float, max_w: float
                ) -> float | None:
        """The limit on a board; None when an explicit one is outside."""
        if self.name == 'max-performance':
            return max_w
        if self.watts is not None:
            return self.watts if min_w <= self.watts <= max_w else None
        fraction = (self.percent / 100.0 if self.percent is not None
                    else FRACTIONS[self.name])
        return min(max_w, max(min_w, default_w * fraction))


def _bad(value, reason) -> exception.InvalidOption:
    return exception.InvalidOption(group=OPTION[0], option=OPTION[1],
                                   value=value, reason=reason)


def parse_profile(text: str, value: str = '') -> Profile:
    text = text.strip()
    if text.lower() in schema.POWER_PROFILES:
        return Profile(text.lower())
    m = _VALUE.match(text)
    if not m:
        raise _bad(value or text, 'expected one of %s, <N>W or <N>%%' % (
            ', '.join(schema.POWER_PROFILES)))
    number, unit = float(m.group(1)), m.group(2)
    if unit == '%':
        if not MIN_PERCENT <= number <= MAX_PERCENT:
            raise _bad(value or text, 'a percent of the default limit '
                                      'must be %d to %d' % (MIN_PERCENT,
                                                            MAX_PERCENT))
        return Profile('%g%%' % number, percent=number)
    if not MIN_WATTS <= number <= MAX_WATTS:
        raise _bad(value or text, 'a limit in watts must be %d to %d' % (
            MIN_WATTS, MAX_WATTS))
    return Profile('%gW' % number, watts=number)


def parse_scoped_profiles(values, option: str,
                          scope: str) -> dict[str, dict[str, Profile]]:
    """``aggregate_profiles`` / ``host_profiles`` -> scope -> model -> Profile.

    Values are ``SCOPE:MODEL:PROFILE`` (``MODEL`` may be ``*``).
    """
    from gpu_nova_ext.agent import override_scope
    out: dict[str, dict[str, Profile]] = {}
    for value in values or ():
        name, rest = override_scope.split(value, OPTION[0], option, scope)
        try:
            (model, profile), = parse_profiles([rest]).items()
        except exception.InvalidOption as exc:
            raise exception.InvalidOption(
                group=OPTION[0], option=option, value=value,
                reason=exc.kwargs['reason'])
        mine = out.setdefault(name, {})
        if model in mine:
            raise exception.InvalidOption(
                group=OPTION[0], option=option, value=value,
                reason='GPU model %s has two power profiles for %s %s' % (
                    model, scope, name))
        mine[model] = profile
    return out


def parse_profiles(values) -> dict[str, Profile]:
    """``[power] profiles`` -> model (or ``*``) -> Profile."""
    profiles: dict[str, Profile] = {}
    for value in values or ():
        model, sep, text = value.partition(':')
        model = model.strip().upper()
        if not sep or not model:
            raise _bad(value, 'expected MODEL:PROFILE or *:PROFILE, for '
                              'example A100_80GB_PCIE:balanced')
        if model in profiles:
            raise _bad(value, 'GPU model %s has two power profiles' % model)
        profiles[model] = parse_profile(text, value)
    return profiles


def profile_for(profiles: dict[str, Profile],
                model: str | None) -> Profile | None:
    """The profile of a model: its own, else ``*``'s, else None."""
    return profiles.get(model or '') or profiles.get('*')


@dataclasses.dataclass
class Applied:
    """One GPU's policy after a cycle (the exporter and the state)."""

    profile: str
    target_w: float | None
    changed: bool = False
    error: str | None = None


class PowerPolicy:
    """Parses ``[power]`` at start (a bad value raises InvalidOption)."""

    def __init__(self, conf):
        from gpu_nova_ext.agent import override_scope
        self.profiles = parse_profiles(conf.power.profiles)
        self.aggregate_profiles = parse_scoped_profiles(
            conf.power.aggregate_profiles, 'aggregate_profiles', 'aggregate')
        hosts = parse_scoped_profiles(conf.power.host_profiles,
                                      'host_profiles', 'host')
        self.chooser = override_scope.Chooser(
            conf.host, self.profiles, self.aggregate_profiles,
            hosts.get(conf.host, {}), wildcard=True)
        #: this host's Placement aggregates (None: not read yet)
        self.aggregates: frozenset | None = None
        self.sysfs_root = conf.agent.sysfs_root
        #: pci address -> Applied, of the last cycle
        self.applied: dict[str, Applied] = {}

    @property
    def active(self) -> bool:
        return self.chooser.active()

    @property
    def needs_aggregates(self) -> bool:
        return bool(self.aggregate_profiles)

    def choose(self, model: str | None):
        """The ``override_scope.Choice`` of ``model``'s profile here."""
        return self.chooser.choose(model or '', self.aggregates)

    def profile_for(self, model: str | None) -> Profile | None:
        return self.choose(model).value

    def check(self, nvml, inventory) -> None:
        """Refuse, at start, an explicit limit outside a GPU's range."""
        for gpu in inventory.gpus:
            # every profile this host's GPU may get, whatever aggregates
            for profile in self.chooser.candidates(gpu.model or ''):
                if profile.watts is None:
                    continue
                bounds = self._bounds(nvml, gpu)
                if bounds and profile.limit_w(*bounds) is None:
                    raise _bad('%s:%s' % (gpu.model, profile.name),
                               'GPU %s (%s) allows %g to %g W' % (
                                   gpu.pci_address, gpu.model, bounds[1],
                                   bounds[2]))

    def _bounds(self, nvml, gpu):
        """(default, min, max) in watts, or None."""
        if gpu.vendor == 'nvidia' and nvml is not None:
            h = nvml.nvmlDeviceGetHandleByPciBusId(gpu.pci_address)
            lo, hi = nvml.nvmlDeviceGetPowerManagementLimitConstraints(h)
            return (nvml.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1e3,
                    lo / 1e3, hi / 1e3)
        if gpu.vendor == 'amd':
            hwmon = self._hwmon(gpu.pci_address)
            if hwmon:
                values = [_read(hwmon, n) for n in (
                    'power1_cap_default', 'power1_cap_min', 'power1_cap_max')]
                if None not in values:
                    return tuple(v / 1e6 for v in values)
        return None

    def _hwmon(self, address: str) -> str | None:
        found = sorted(glob.glob(os.path.join(
            self.sysfs_root, 'bus', 'pci', 'devices', address, 'hwmon',
            'hwmon*')))
        return found[0] if found else None

    def apply(self, nvml, inventory) -> dict[str, Applied]:
        """Set each GPU's limit where it differs; note it on the GPUs."""
        applied = {}
        for gpu in inventory.gpus:
            if gpu.vendor not in ('nvidia', 'amd'):
                continue
            choice = self.choose(gpu.model)
            if choice.problem:
                LOG.warning('No power profile for GPU %(gpu)s: %(why)s',
                            {'gpu': gpu.pci_address, 'why': choice.problem})
                applied[gpu.pci_address] = Applied('-', None,
                                                   error=choice.problem)
                continue
            profile = choice.value
            if profile is None:
                continue
            result = Applied(profile.name, None)
            try:
                bounds = self._bounds(nvml, gpu)
                if bounds is None:
                    result.error = 'no power limit control found'
                else:
                    result.target_w = profile.limit_w(*bounds)
                    if result.target_w is None:
                        result.error = 'outside the %g-%g W the GPU ' \
                            'allows' % bounds[1:]
                    else:
                        result.changed = self._set(nvml, gpu,
                                                   result.target_w)
            except privileged.DAEMON_ERRORS as exc:
                result.error = privileged.daemon_error(exc)
            except Exception as exc:  # noqa: NVML or sysfs, said below
                code = getattr(exc, 'value', None)
                result.error = ('NVML error %s' % code if code is not None
                                else str(exc) or type(exc).__name__)
            if result.error:
                LOG.error('Power profile %(p)s of GPU %(gpu)s not applied: '
                          '%(err)s', {'p': profile.name,
                                      'gpu': gpu.pci_address,
                                      'err': result.error})
            elif result.changed:
                LOG.info('Power profile %(p)s of GPU %(gpu)s: limit set to '
                         '%(w).0f W', {'p': profile.name,
                                       'gpu': gpu.pci_address,
                                       'w': result.target_w})
                gpu.power_limit_w = result.target_w
            if not result.error:
                gpu.power_profile = profile.name
            applied[gpu.pci_address] = result
        self.applied = applied
        return applied

    def _set(self, nvml, gpu, watts: float) -> bool:
        """Read the limit; where it differs, have the daemon set it."""
        if gpu.vendor == 'nvidia':
            h = nvml.nvmlDeviceGetHandleByPciBusId(gpu.pci_address)
            target = int(round(watts * 1000))
            if nvml.nvmlDeviceGetPowerManagementLimit(h) == target:
                return False
            privileged.set_power_limit(gpu.pci_address, target)
            return True
        hwmon = self._hwmon(gpu.pci_address)
        target = int(round(watts * 1e6))
        if _read(hwmon, 'power1_cap') == target:
            return False
        privileged.set_hwmon_power_cap(self.sysfs_root, gpu.pci_address,
                                       target)
        return True


def _read(directory: str, name: str) -> int | None:
    try:
        with open(os.path.join(directory, name)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None
