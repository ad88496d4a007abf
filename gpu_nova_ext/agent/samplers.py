# SPDX-License-Identifier: Apache-2.0

"""The default sampler of the health monitor: every vendor at once.

NVIDIA GPUs are read through NVML (:class:`sampler.NvmlSampler`), AMD and
Intel GPUs through sysfs (:class:`sysfs_sampler.SysfsSampler`).  A host
without NVIDIA's driver still samples its AMD GPUs and the reverse: the
monitor is unavailable only when no source opens.
"""
import time
from typing import Callable

from oslo_log import log as logging

from gpu_nova_ext.agent import sampler as sampler_mod
from gpu_nova_ext.agent import sysfs_sampler

LOG = logging.getLogger(__name__)


class NoSampler(Exception):
    """No sampler could open; the message names each one's reason."""


class AllVendors:
    """Opens, samples and closes the NVML and sysfs samplers together."""

    def __init__(self, sysfs_root: str = '/sys',
                 clock: Callable[[], float] = time.monotonic,
                 parts=None):
        self.parts = parts if parts is not None else [
            ('NVML', sampler_mod.NvmlSampler(clock=clock)),
            ('sysfs', sysfs_sampler.SysfsSampler(sysfs_root, clock=clock))]
        self._open: list = []

    def open(self) -> None:
        failures = []
        self._open = []
        for name, part in self.parts:
            try:
                part.open()
            except Exception as exc:
                failures.append('%s: %s' % (name, exc))
                continue
            self._open.append(part)
        if not self._open:
            raise NoSampler('; '.join(failures))
        for failure in failures:
            LOG.info('GPU sampler %s not available; its GPUs are not '
                     'sampled', failure)

    def sample(self) -> list[sampler_mod.GpuSample]:
        out = []
        for part in self._open:
            out.extend(part.sample())
        return out

    def close(self) -> None:
        for part in self._open:
            part.close()
        self._open = []
