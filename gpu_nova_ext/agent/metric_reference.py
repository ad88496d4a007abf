# SPDX-License-Identifier: Apache-2.0

"""The reference of the exporter's metrics, read from the exporter itself.

:func:`metric_families` renders :class:`~gpu_nova_ext.agent.exporter.
Exporter`'s exposition for one GPU of each vendor whose sample has every
metric (a mapping in which every key has a value), and reads back what
it holds: each family's name, help text, labels and the vendors it comes
for.  Nothing here lists a metric: a metric added to the exporter is in
the reference (``doc/source/metrics.rst`` renders it with the
``gpu-nova-ext-metrics`` directive of ``doc/source/_exts``), and the
dashboard test checks the dashboard's series against the same names.
"""
import dataclasses

from prometheus_client import parser

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.agent import sampler

#: the GPU vendors the agent samples (NVML; sysfs for AMD and Intel)
VENDORS = ('nvidia', 'amd', 'intel')
#: the labels of every per-GPU series (dcgm-exporter's, and the server's)
COMMON_LABELS = exporter.LABELS


class _EveryMetric(dict):
    """Sample metrics in which every key has a value."""

    def __contains__(self, key):
        return True

    def __missing__(self, key):
        return 1

    def get(self, key, default=None):
        return self[key]


@dataclasses.dataclass
class MetricFamily:
    name: str
    help: str
    type: str
    labels: tuple[str, ...]
    vendors: tuple[str, ...]


def _sample(vendor: str) -> sampler.GpuSample:
    sample = sampler.GpuSample(
        index=0, pci_address='0000:3b:00.0', bus_id='00000000:3B:00.0',
        uuid='GPU-0', name='model', timestamp=0.0, vendor=vendor,
        metrics=_EveryMetric(), instance_uuid='server')
    sample.vgpus.append({'instance': 1, 'type': 'vgpu-type',
                         'sm_util_pct': 1, 'instance_uuid': 'server'})
    return sample


def exposition(vendor: str) -> str:
    """The exporter's text for one GPU of ``vendor`` with every metric."""
    exp = exporter.Exporter('host')
    exp.update([{'sample': _sample(vendor), 'state': 'healthy',
                 'scores': {'utilization_pct': 0.0}}], duration=0.0)
    return exp.render()


def metric_families() -> list[MetricFamily]:
    """Every family the exporter serves, sorted by name."""
    found: dict[str, dict] = {}
    for vendor in VENDORS:
        for fam in parser.text_string_to_metric_families(
                exposition(vendor)):
            entry = found.setdefault(fam.name, {
                'help': fam.documentation, 'type': fam.type,
                'labels': [], 'vendors': []})
            for s in fam.samples:
                for label in s.labels:
                    if label not in entry['labels']:
                        entry['labels'].append(label)
            entry['vendors'].append(vendor)
    return [MetricFamily(name=name, help=e['help'], type=e['type'],
                         labels=tuple(e['labels']),
                         vendors=tuple(e['vendors']))
            for name, e in sorted(found.items())]


def metric_names() -> set[str]:
    """The names of :func:`metric_families`."""
    return {f.name for f in metric_families()}
