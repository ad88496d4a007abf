# SPDX-License-Identifier: Apache-2.0

"""AMD and Intel metrics from the kernel's sysfs: the NVML sampler's peer.

The source is the kernel, not a vendor library: amdgpu and xe/i915
publish what the agent needs in sysfs, readable without ROCm's amdsmi or
Intel's XPU Manager installed on the compute host, and a GPU bound to
vfio-pci (passed through) is no more readable by those libraries than by
sysfs.  Per GPU under ``<sysfs_root>/bus/pci/devices/<address>/``:

amdgpu
    ``gpu_busy_percent``, ``mem_busy_percent``, ``mem_info_vram_used`` and
    ``mem_info_vram_total`` (bytes); ``hwmon/hwmon*/``: ``tempN_input``
    with ``tempN_label`` ``edge``/``junction``/``mem`` (milli-degrees),
    ``tempN_crit`` (the slowdown threshold) and ``tempN_emergency``
    (shutdown), ``power1_average`` or ``power1_input`` and ``power1_cap``
    (microwatts), ``energy1_input`` (microjoules), ``freq1_input``/
    ``freq2_input`` (sclk/mclk, Hz); ``ras/<block>_err_count`` (``ue: N``
    and ``ce: N`` lines) summed over the blocks.
xe / i915
    ``hwmon/hwmon*/``: ``tempN_input`` with label ``pkg``/``vram`` (xe),
    ``power1_max`` (microwatts), ``energy1_input`` (microjoules; power is
    its rate between samples); GT thermal throttling: xe
    ``tile*/gt*/freq0/throttle/reason_thermal``, i915
    ``drm/card*/gt/gt*/throttle_reason_thermal``.

Samples carry the metric keys of :class:`sampler.NvmlSampler` where they
mean the same (``utilization_pct``, ``memory_used_mib``, ``temperature_c``,
``power_w``, ``ecc_dbe_volatile`` for uncorrectable errors, ...) so the
health judge, the exporter and the state payload treat every vendor alike.
A file that is absent is not read again (like an NVML NotSupported); a
read that fails (EIO, EBUSY) is an error of that sample; a device whose
directory vanished or that answers ENODEV is ``lost``.
"""
import dataclasses
import errno
import os
import time
from typing import Any, Callable

from oslo_log import log as logging

from gpu_nova_ext.agent import nvml_readers
from gpu_nova_ext.agent import sampler as sampler_mod
from gpu_nova_ext.inventory import gpu_models
from gpu_nova_ext.inventory import recognition
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

DRIVERS = {'amdgpu': 'amd', 'xe': 'intel', 'i915': 'intel'}
MIB = nvml_readers.MIB
_LOST = (errno.ENODEV, errno.ENXIO)
_ABSENT = (errno.ENOENT, errno.EOPNOTSUPP, errno.ENODATA, errno.EINVAL)


class DeviceLost(Exception):
    """The device is gone (hot-unplugged, fallen off the bus)."""


@dataclasses.dataclass
class _Device:
    index: int
    vendor: str
    driver: str
    pci_address: str
    path: str
    uuid: str | None
    name: str | None
    card: str | None
    hwmon: str | None = None
    absent: set = dataclasses.field(default_factory=set)
    energy: tuple[float, float] | None = None   # (joules, at)


def _bus_id(address: str) -> str:
    domain, rest = address.split(':', 1)
    return ('%08x:%s' % (int(domain, 16), rest)).upper()


class SysfsSampler:
    """Reads every amdgpu, xe and i915 GPU under ``sysfs_root``.

    ``opener`` opens a file for reading (tests inject kernel errors with
    it); ``clock`` is the monotonic clock for power from energy.
    """

    def __init__(self, sysfs_root: str = '/sys',
                 opener: Callable[..., Any] = open,
                 clock: Callable[[], float] = time.monotonic):
        self.root = sysfs_root
        self._open = opener
        self._clock = clock
        self._devices: list[_Device] = []

    @property
    def devices(self) -> list[_Device]:
        return list(self._devices)

    # -- lifecycle ----------------------------------------------------------
    def open(self) -> None:
        """Find the GPUs; raises OSError when there is no PCI tree."""
        devices_dir = os.path.join(self.root, 'bus', 'pci', 'devices')
        entries = sorted(os.listdir(devices_dir))
        counts: dict[str, int] = {}
        self._devices = []
        for entry in entries:
            path = os.path.join(devices_dir, entry)
            dev = self._probe(entry, path, counts)
            if dev is not None:
                self._devices.append(dev)

    def _probe(self, entry, path, counts) -> _Device | None:
        try:
            driver = os.path.basename(os.readlink(os.path.join(path,
                                                               'driver')))
            address = naming.normalize_pci_address(entry)
        except (OSError, ValueError):
            return None
        vendor = DRIVERS.get(driver)
        if vendor is None or os.path.islink(os.path.join(path, 'physfn')):
            return None
        vendor_id = self._text(path, 'vendor', None)
        product_id = self._text(path, 'device', None)
        klass = self._text(path, 'class', None)
        try:
            class_code = int(klass, 16) >> 8 if klass else None
            vendor_id = '%04x' % int(vendor_id, 16)
            product_id = '%04x' % int(product_id, 16)
        except (TypeError, ValueError):
            return None
        if recognition.why_not_gpu(vendor_id, product_id,
                                   class_code) is not None:
            return None
        index = counts.get(vendor, 0)
        counts[vendor] = index + 1
        cards = sorted(n for n in self._listdir(os.path.join(path, 'drm'))
                       if n.startswith('card'))
        hwmons = sorted(self._listdir(os.path.join(path, 'hwmon')))
        dev = _Device(
            index=index, vendor=vendor, driver=driver, pci_address=address,
            path=path, uuid=self._text(path, 'unique_id', None),
            name=(gpu_models.model_for(vendor_id, product_id)
                  or '%s:%s' % (vendor_id, product_id)),
            card=cards[0] if cards else None,
            hwmon=os.path.join(path, 'hwmon', hwmons[0]) if hwmons else None)
        return dev

    def close(self) -> None:
        self._devices = []

    # -- reading ------------------------------------------------------------
    @staticmethod
    def _listdir(path: str) -> list[str]:
        try:
            return os.listdir(path)
        except OSError:
            return []

    def _text(self, directory: str, name: str, dev=None) -> str | None:
        """One attribute's text; None when absent (remembered on ``dev``).

        Raises DeviceLost, or OSError for a read that failed.
        """
        path = os.path.join(directory, name)
        if dev is not None and path in dev.absent:
            return None
        try:
            with self._open(path, encoding='utf-8', errors='replace') as f:
                return f.read().strip()
        except OSError as exc:
            if exc.errno in _LOST:
                raise DeviceLost(str(exc))
            if exc.errno in _ABSENT or isinstance(exc, IsADirectoryError):
                if dev is not None:
                    if not os.path.isdir(dev.path):
                        raise DeviceLost('%s is gone' % dev.path)
                    dev.absent.add(path)
                return None
            if dev is None:
                return None
            raise

    def sample(self) -> list[sampler_mod.GpuSample]:
        wall = time.time()
        now = self._clock()
        samples = []
        for dev in self._devices:
            sample = sampler_mod.GpuSample(
                dev.index, dev.pci_address, _bus_id(dev.pci_address),
                dev.uuid, dev.name, wall, vendor=dev.vendor,
                device=dev.card or '%s%d' % (dev.driver, dev.index))
            try:
                if not os.path.isdir(dev.path):
                    raise DeviceLost('%s is gone' % dev.path)
                self._read(dev, sample, now)
            except DeviceLost as exc:
                sample.lost = True
                sample.errors['lost'] = str(exc)
            samples.append(sample)
        return samples

    def _read(self, dev, sample, now) -> None:
        readers = [self._hwmon]
        if dev.vendor == 'amd':
            readers += [self._amd_activity, self._amd_ras]
        else:
            readers.append(self._intel_throttle)
        for reader in readers:
            try:
                reader(dev, sample.metrics, now)
            except OSError as exc:
                sample.errors[reader.__name__.strip('_')] = '%s: %s' % (
                    errno.errorcode.get(exc.errno, exc.errno), exc.strerror)

    def _number(self, directory, name, dev) -> float | None:
        text = self._text(directory, name, dev)
        if text is None:
            return None
        try:
            return float(text.split()[0])
        except (ValueError, IndexError):
            LOG.debug('GPU %s: %s is not a number: %r', dev.pci_address,
                      name, text)
            return None

    def _amd_activity(self, dev, m, _now) -> None:
        for name, key in (('gpu_busy_percent', 'utilization_pct'),
                          ('mem_busy_percent', 'memory_utilization_pct')):
            value = self._number(dev.path, name, dev)
            if value is not None:
                m[key] = value
        used = self._number(dev.path, 'mem_info_vram_used', dev)
        total = self._number(dev.path, 'mem_info_vram_total', dev)
        if used is not None:
            m['memory_used_mib'] = int(used) // MIB
        if total is not None:
            m['memory_total_mib'] = int(total) // MIB
            if used is not None:
                m['memory_free_mib'] = (int(total) - int(used)) // MIB

    def _amd_ras(self, dev, m, _now) -> None:
        ras = os.path.join(dev.path, 'ras')
        ue = ce = None
        for name in sorted(self._listdir(ras)):
            if not name.endswith('_err_count'):
                continue
            text = self._text(ras, name, dev) or ''
            for line in text.splitlines():
                kind, _, value = line.partition(':')
                try:
                    count = int(value.strip())
                except ValueError:
                    continue
                if kind.strip() == 'ue':
                    ue = (ue or 0) + count
                elif kind.strip() == 'ce':
                    ce = (ce or 0) + count
        if ue is not None:
            m['ecc_dbe_volatile'] = ue
        if ce is not None:
            m['ecc_sbe_volatile'] = ce

    def _hwmon(self, dev, m, now) -> None:
        hw = dev.hwmon
        if hw is None:
            return
        temps = {}
        for name in self._listdir(hw):
            if name.startswith('temp') and name.endswith('_input'):
                n = name[4:-6]
                label = self._text(hw, 'temp%s_label' % n, dev) or n
                temps[label] = n
        main = temps.get('edge') or temps.get('junction') or \
            temps.get('pkg')
        for key, n in (('temperature_c', main),
                       ('junction_temperature_c', temps.get('junction')),
                       ('memory_temperature_c', temps.get('mem')
                        or temps.get('vram'))):
            value = n and self._number(hw, 'temp%s_input' % n, dev)
            if value is not None:
                m[key] = value / 1000.0
        for key, attr in (('slowdown_temperature_c', 'crit'),
                          ('shutdown_temperature_c', 'emergency')):
            value = main and self._number(hw, 'temp%s_%s' % (main, attr),
                                          dev)
            if value:
                m[key] = value / 1000.0
        power = (self._number(hw, 'power1_average', dev)
                 or self._number(hw, 'power1_input', dev))
        if power is not None:
            m['power_w'] = power / 1e6
        limit = (self._number(hw, 'power1_cap', dev)
                 or self._number(hw, 'power1_max', dev))
        if limit:
            m['power_limit_w'] = limit / 1e6
        energy = self._number(hw, 'energy1_input', dev)
        if energy is not None:
            joules = energy / 1e6
            m['energy_j'] = joules
            if 'power_w' not in m and dev.energy and now > dev.energy[1]:
                m['power_w'] = max(0.0, (joules - dev.energy[0])
                                   / (now - dev.energy[1]))
            dev.energy = (joules, now)
        for key, n in (('sm_clock_mhz', '1'), ('memory_clock_mhz', '2')):
            value = self._number(hw, 'freq%s_input' % n, dev)
            if value is not None:
                m[key] = value / 1e6

    def _intel_throttle(self, dev, m, _now) -> None:
        paths = []
        for tile in self._listdir(dev.path):
            if tile.startswith('tile'):
                for gt in self._listdir(os.path.join(dev.path, tile)):
                    paths.append(os.path.join(dev.path, tile, gt, 'freq0',
                                              'throttle', 'reason_thermal'))
        if dev.card:
            gts = os.path.join(dev.path, 'drm', dev.card, 'gt')
            for gt in self._listdir(gts):
                paths.append(os.path.join(gts, gt, 'throttle_reason_thermal'))
        flags = [self._number(os.path.dirname(p), os.path.basename(p), dev)
                 for p in paths]
        flags = [f for f in flags if f is not None]
        if flags:
            m['thermal_throttle'] = int(any(flags))
