# SPDX-License-Identifier: Apache-2.0

"""Prometheus exporter with NVIDIA dcgm-exporter's metric and label names.

Series that dcgm-exporter has keep its names (``DCGM_FI_DEV_GPU_UTIL``,
``DCGM_FI_DEV_FB_USED``, ...), its units and its labels (``gpu``, ``UUID``,
``pci_bus_id``, ``device``, ``modelName``, ``Hostname``), so existing
Grafana dashboards work unchanged; health, anomaly scores and vGPU
instances come as ``gpu_nova_ext_*`` series.  All are gauges (dcgm-exporter's
counters have no ``_total`` suffix, which a prometheus-client counter would
add).  The exporter has its own ``CollectorRegistry`` and serves the last
sample, whatever Placement or the message broker are doing, through the
bounded server of :mod:`metrics_http` (fixed worker pool, idle timeout);
the exposition is rendered once per sample, not once per scrape.
"""
import threading
from typing import Iterable

from oslo_log import log as logging
from oslo_utils import netutils
from prometheus_client import core
from prometheus_client import exposition
from prometheus_client import registry as prom_registry

from gpu_nova_ext.agent import metrics_http
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

LABELS = ('gpu', 'UUID', 'pci_bus_id', 'device', 'modelName', 'Hostname',
          'instance_uuid')

#: sample metric key -> (dcgm-exporter name, help, scale)
DCGM_METRICS = (
    ('utilization_pct', 'DCGM_FI_DEV_GPU_UTIL', 'GPU utilization (in %).', 1),
    ('memory_utilization_pct', 'DCGM_FI_DEV_MEM_COPY_UTIL',
     'Memory utilization (in %).', 1),
    ('encoder_utilization_pct', 'DCGM_FI_DEV_ENC_UTIL',
     'Encoder utilization (in %).', 1),
    ('decoder_utilization_pct', 'DCGM_FI_DEV_DEC_UTIL',
     'Decoder utilization (in %).', 1),
    ('memory_used_mib', 'DCGM_FI_DEV_FB_USED',
     'Framebuffer memory used (in MiB).', 1),
    ('memory_free_mib', 'DCGM_FI_DEV_FB_FREE',
     'Framebuffer memory free (in MiB).', 1),
    ('memory_reserved_mib', 'DCGM_FI_DEV_FB_RESERVED',
     'Framebuffer memory reserved (in MiB).', 1),
    ('memory_total_mib', 'DCGM_FI_DEV_FB_TOTAL',
     'Framebuffer memory total (in MiB).', 1),
    ('temperature_c', 'DCGM_FI_DEV_GPU_TEMP', 'GPU temperature (in C).', 1),
    ('memory_temperature_c', 'DCGM_FI_DEV_MEMORY_TEMP',
     'Memory temperature (in C).', 1),
    ('slowdown_temperature_c', 'DCGM_FI_DEV_SLOWDOWN_TEMP',
     'Slowdown temperature threshold (in C).', 1),
    ('shutdown_temperature_c', 'DCGM_FI_DEV_SHUTDOWN_TEMP',
     'Shutdown temperature threshold (in C).', 1),
    ('power_w', 'DCGM_FI_DEV_POWER_USAGE', 'Power draw (in W).', 1),
    ('power_limit_w', 'DCGM_FI_DEV_POWER_MGMT_LIMIT',
     'Power management limit (in W).', 1),
    ('energy_j', 'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION',
     'Total energy consumption since boot (in mJ).', 1000),
    ('sm_clock_mhz', 'DCGM_FI_DEV_SM_CLOCK', 'SM clock frequency (in MHz).',
     1),
    ('memory_clock_mhz', 'DCGM_FI_DEV_MEM_CLOCK',
     'Memory clock frequency (in MHz).', 1),
    ('clocks_event_reasons', 'DCGM_FI_DEV_CLOCK_THROTTLE_REASONS',
     'Current clock throttle reasons (bitmask).', 1),
    ('clocks_event_reasons', 'DCGM_FI_DEV_CLOCKS_EVENT_REASONS',
     'Current clock event reasons (bitmask).', 1),
    ('pstate', 'DCGM_FI_DEV_PSTATE', 'Performance state (0 is fastest).', 1),
    ('fan_speed_pct', 'DCGM_FI_DEV_FAN_SPEED', 'Fan speed (in %).', 1),
    ('pcie_tx_kbps', 'DCGM_FI_DEV_PCIE_TX_THROUGHPUT',
     'PCIe TX throughput (in KB/s).', 1),
    ('pcie_rx_kbps', 'DCGM_FI_DEV_PCIE_RX_THROUGHPUT',
     'PCIe RX throughput (in KB/s).', 1),
    ('pcie_replay_count', 'DCGM_FI_DEV_PCIE_REPLAY_COUNTER',
     'Total number of PCIe retries.', 1),
    ('ecc_sbe_volatile', 'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL',
     'Total single-bit volatile ECC errors.', 1),
    ('ecc_dbe_volatile', 'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL',
     'Total double-bit volatile ECC errors.', 1),
    ('ecc_sbe_aggregate', 'DCGM_FI_DEV_ECC_SBE_AGG_TOTAL',
     'Total single-bit persistent ECC errors.', 1),
    ('ecc_dbe_aggregate', 'DCGM_FI_DEV_ECC_DBE_AGG_TOTAL',
     'Total double-bit persistent ECC errors.', 1),
    ('retired_pages_sbe', 'DCGM_FI_DEV_RETIRED_SBE',
     'Total number of retired pages due to single-bit errors.', 1),
    ('retired_pages_dbe', 'DCGM_FI_DEV_RETIRED_DBE',
     'Total number of retired pages due to double-bit errors.', 1),
    ('retired_pages_pending', 'DCGM_FI_DEV_RETIRED_PENDING',
     'Pages pending retirement.', 1),
    ('remapped_rows_correctable', 'DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS',
     'Number of remapped rows for correctable errors.', 1),
    ('remapped_rows_uncorrectable',
     'DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS',
     'Number of remapped rows for uncorrectable errors.', 1),
    ('remapped_rows_pending', 'DCGM_FI_DEV_ROW_REMAP_PENDING',
     'Whether a row remapping is pending.', 1),
    ('remap_failure', 'DCGM_FI_DEV_ROW_REMAP_FAILURE',
     'Whether remapping of rows has failed.', 1),
)

#: AMD GPUs: sample metric key -> (AMD device-metrics-exporter name, help);
#: these replace the DCGM series of the same key, the other keys keep
#: their DCGM name.  Units as AMD's exporter: percent, MB, Celsius, W.
AMD_METRICS = {
    'utilization_pct': ('gpu_gfx_activity',
                        'Graphics engine usage percentage (0 - 100).'),
    'memory_utilization_pct': ('gpu_umc_activity',
                               'Memory engine usage percentage (0 - 100).'),
    'memory_used_mib': ('gpu_used_vram', 'Used VRAM (in MB).'),
    'memory_total_mib': ('gpu_total_vram', 'Total VRAM (in MB).'),
    'memory_free_mib': ('gpu_free_vram', 'Free VRAM (in MB).'),
    'temperature_c': ('gpu_edge_temperature',
                      'Edge temperature value in Celsius.'),
    'junction_temperature_c': ('gpu_junction_temperature',
                               'Hotspot (aka junction) temperature value '
                               'in Celsius.'),
    'memory_temperature_c': ('gpu_memory_temperature',
                             'Memory temperature value in Celsius.'),
    'power_w': ('gpu_power_usage', 'Power usage in Watts.'),
    'ecc_sbe_volatile': ('gpu_ecc_correct_total',
                         'Correctable RAS errors, all blocks.'),
    'ecc_dbe_volatile': ('gpu_ecc_uncorrect_total',
                         'Uncorrectable RAS errors, all blocks.'),
}

#: gpu-nova-ext's own per-GPU series: sample metric key -> (name, help,
#: scale); like DCGM_METRICS, for the metric reference
OWN_METRICS = (
    ('energy_j', 'gpu_nova_ext_energy_joules',
     'Energy the GPU used (in J) since its counter started (NVML: since '
     'the driver loaded; AMD and Intel hwmon: since boot); the '
     'instance_uuid label names the server on the GPU.', 1),
)
#: the power policy's series (``[power] profiles``)
POWER_PROFILE_METRIC = (
    'gpu_nova_ext_power_profile',
    'Power profile of the GPU ([power] profiles): 1 for the profile '
    'applied, with the limit set (target_watts) and, when it could not be '
    'applied, the error.')
SERVER_ENERGY_METRIC = (
    'gpu_nova_ext_server_energy_joules',
    'Energy of the GPU(s) a server used (in J) since the agent started: a '
    'whole GPU\'s to its server, a vGPU GPU\'s split by SM utilization; '
    'kept an hour after the server left the GPU.')
MIG_LAYOUT_METRIC = (
    'gpu_nova_ext_mig_layout_state',
    'MIG layout of the GPU ([mig] layouts): 1 for its state after the '
    'last cycle: in_line, changed, pending (a GPU reset), blocked (in '
    'use), failed (NVML refused; see the log) or planned ([mig] apply '
    'off).')
POWER_TARGET_METRIC = (
    'gpu_nova_ext_power_limit_target_watts',
    'Power limit the power profile asks of the GPU (in W).')

HEALTH_CODES = {'healthy': 0, 'degraded': 1, 'unhealthy': 2}
#: the states of MIG_LAYOUT_METRIC (agent.mig_manager.STATES)
MIG_STATES = ('in_line', 'changed', 'pending', 'blocked', 'failed',
              'planned')


def naming_address(address: str) -> str:
    try:
        return naming.normalize_pci_address(address)
    except ValueError:
        return address


class _Collector(prom_registry.Collector):
    def __init__(self, exporter: 'Exporter'):
        self._exporter = exporter

    def collect(self) -> Iterable[core.Metric]:
        snapshot = self._exporter.snapshot()
        host = self._exporter.hostname
        families = {}

        def family(name, doc, extra=()):
            fam = families.get(name)
            if fam is None:
                fam = families[name] = core.GaugeMetricFamily(
                    name, doc, labels=LABELS + tuple(extra))
            return fam

        for entry in snapshot:
            sample = entry['sample']
            labels = (str(sample.index), sample.uuid or '', sample.bus_id,
                      sample.device or 'nvidia%d' % sample.index,
                      sample.name or '', host, sample.instance_uuid or '')
            metrics = sample.metrics
            amd = sample.vendor == 'amd'
            for key, name, doc, scale in DCGM_METRICS:
                value = metrics.get(key)
                if value is None:
                    continue
                if amd and key in AMD_METRICS:
                    name, doc = AMD_METRICS[key]
                    scale = 1
                family(name, doc).add_metric(labels, value * scale)
            for key, name, doc, scale in OWN_METRICS:
                if metrics.get(key) is not None:
                    family(name, doc).add_metric(labels,
                                                 metrics[key] * scale)
            power = self._exporter.power.get(
                naming_address(sample.pci_address))
            if power is not None:
                family(*POWER_PROFILE_METRIC, extra=('profile', 'error')
                       ).add_metric(labels + (power.profile,
                                              power.error or ''), 1)
                if power.target_w is not None:
                    family(*POWER_TARGET_METRIC).add_metric(
                        labels, power.target_w)
            mig = self._exporter.mig.get(naming_address(sample.pci_address))
            if mig is not None:
                fam = family(*MIG_LAYOUT_METRIC, extra=('state',))
                for name in MIG_STATES:
                    fam.add_metric(labels + (name,), int(name == mig))
            if amd and 'junction_temperature_c' in metrics:
                family(*AMD_METRICS['junction_temperature_c']).add_metric(
                    labels, metrics['junction_temperature_c'])
            if sample.vendor == 'nvidia':
                family('DCGM_FI_DEV_XID_ERRORS',
                       'Value of the last XID error encountered.'
                       ).add_metric(labels, metrics.get('xid_last', 0))
                family('gpu_nova_ext_xid_events',
                       'XID events seen since the agent started.'
                       ).add_metric(labels, metrics.get('xid_count', 0))
            if 'thermal_throttle' in metrics:
                family('gpu_nova_ext_thermal_throttle',
                       '1 while the GPU throttles for temperature.'
                       ).add_metric(labels, metrics['thermal_throttle'])
            state = entry.get('state', 'healthy')
            fam = family('gpu_nova_ext_health_state',
                         'GPU health: 1 for the current state.', ('state',))
            for name in HEALTH_CODES:
                fam.add_metric(labels + (name,), int(name == state))
            family('gpu_nova_ext_health_code',
                   'GPU health: 0 healthy, 1 degraded, 2 unhealthy.'
                   ).add_metric(labels, HEALTH_CODES.get(state, 2))
            family('gpu_nova_ext_gpu_lost',
                   '1 when NVML or sysfs report the GPU lost.').add_metric(
                       labels, int(sample.lost))
            fam = family('gpu_nova_ext_anomaly_score',
                         'Deviation of a metric from its learned baseline '
                         'in units of [health] anomaly_threshold (>1 is '
                         'anomalous).', ('metric',))
            for metric, score in sorted(entry.get('scores', {}).items()):
                fam.add_metric(labels + (metric,), score)
            if 'vgpu_instances' in metrics:
                family('gpu_nova_ext_vgpu_instances',
                       'Active vGPU instances.').add_metric(
                           labels, metrics['vgpu_instances'])
            fam = family('gpu_nova_ext_vgpu_sm_utilization',
                         'SM utilization of a vGPU instance (in %).',
                         ('vgpu_instance', 'vgpu_type'))
            for vgpu in sample.vgpus:
                if 'sm_util_pct' in vgpu:
                    # the server using this vGPU, not the GPU's
                    vlabels = labels[:-1] + (vgpu.get('instance_uuid')
                                             or '',)
                    fam.add_metric(vlabels + (str(vgpu['instance']),
                                              vgpu['type']),
                                   vgpu['sm_util_pct'])
        stats = self._exporter.stats
        yield from families.values()
        fam = core.GaugeMetricFamily(
            SERVER_ENERGY_METRIC[0], SERVER_ENERGY_METRIC[1],
            labels=('Hostname', 'instance_uuid', 'pci_bus_id'))
        for server, (address, joules) in sorted(
                self._exporter.server_energy.items()):
            fam.add_metric((host, server, address), joules)
        yield fam
        fam = core.GaugeMetricFamily(
            'gpu_nova_ext_sample_duration_seconds',
            'Wall time of the last NVML sample of all GPUs.',
            labels=('Hostname',))
        fam.add_metric((host,), stats.get('duration', 0.0))
        yield fam
        fam = core.GaugeMetricFamily(
            'gpu_nova_ext_samples', 'Samples taken since the agent started.',
            labels=('Hostname',))
        fam.add_metric((host,), stats.get('count', 0))
        yield fam


def management_address() -> str:
    """This host's management address, as Nova's ``[DEFAULT] my_ip``.

    The address of the interface that holds the default IPv4 route
    (:func:`oslo_utils.netutils.get_my_ipv4`, the default of Nova's
    ``my_ip``); 127.0.0.1 when there is none.
    """
    return netutils.get_my_ipv4()


class Exporter:
    """Serves the latest samples on ``bind_host:port`` (0: ephemeral).

    ``bind_host`` None is :func:`management_address`; ``access`` (HTTPS,
    basic authentication) none by default.
    """

    def __init__(self, hostname: str, bind_host: str | None = '127.0.0.1',
                 port: int = 0, workers: int = 4,
                 idle_timeout: float = 10.0, max_connections: int = 128,
                 access: metrics_http.Access | None = None):
        self.hostname = hostname
        self.access = access
        self.bind_host = bind_host or management_address()
        self.requested_port = port
        self.workers = workers
        self.idle_timeout = idle_timeout
        self.max_connections = max_connections
        self.registry = prom_registry.CollectorRegistry(auto_describe=False)
        self.registry.register(_Collector(self))
        self.stats: dict = {}
        self._lock = threading.Lock()
        self._snapshot: list[dict] = []
        #: pci address -> power_policy.Applied of the last agent cycle
        self.power: dict = {}
        #: pci address -> MIG layout state of the last agent cycle
        self.mig: dict = {}
        #: instance uuid -> (PCI address, joules) of the energy ledger
        self.server_energy: dict = {}
        self._rendered: tuple[int, bytes] | None = None
        self._server = None

    def update(self, entries: list[dict], duration: float | None = None,
               ) -> None:
        """Publish ``[{'sample', 'state', 'scores'}, ...]``."""
        with self._lock:
            self._snapshot = entries
            self.stats = {'duration': duration or 0.0,
                          'count': self.stats.get('count', 0) + 1}

    def set_mig(self, states: dict) -> None:
        """The MIG layout state of each laid-out GPU, by PCI address."""
        with self._lock:
            self.mig = {naming_address(k): v for k, v in states.items()}
            self._rendered = None

    def set_server_energy(self, by_server: dict) -> None:
        """The energy ledger's totals (the next ``update`` renders)."""
        with self._lock:
            self.server_energy = dict(by_server)

    def set_power(self, applied: dict) -> None:
        """The power policy of the last cycle, by PCI address."""
        with self._lock:
            self.power = {naming_address(k): v
                          for k, v in applied.items()}
            self._rendered = None

    def snapshot(self) -> list[dict]:
        with self._lock:
            return list(self._snapshot)

    def render(self) -> str:
        return self.body().decode()

    def body(self) -> bytes:
        """The exposition of the last sample, rendered once per sample."""
        with self._lock:
            count = self.stats.get('count', 0)
            cached = self._rendered
        if cached is not None and cached[0] == count:
            return cached[1]
        body = exposition.generate_latest(self.registry)
        with self._lock:
            self._rendered = (count, body)
        return body

    @property
    def port(self) -> int | None:
        return self._server.port if self._server else None

    def start(self) -> None:
        self._server = metrics_http.MetricsServer(
            self.bind_host, self.requested_port, self.body,
            workers=self.workers, idle_timeout=self.idle_timeout,
            max_connections=self.max_connections, access=self.access)
        self._server.start()
        LOG.info('Prometheus exporter listening on %(scheme)s://%(host)s:'
                 '%(port)d (%(workers)d workers)',
                 {'scheme': self._server.scheme, 'host': self.bind_host,
                  'port': self.port, 'workers': self.workers})

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
