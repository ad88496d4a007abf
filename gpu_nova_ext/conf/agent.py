# SPDX-License-Identifier: Apache-2.0

"""[agent] options: the compute-host GPU agent."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

agent_group = cfg.OptGroup(
    'agent',
    title='GPU agent options',
    help='Options of gpu-nova-agent, the per compute host GPU agent.')

agent_opts = [
    cfg.StrOpt(
        'mode',
        default='annotate',
        choices=[
            ('annotate', 'Add and remove only CUSTOM_GPU_* traits on the '
                         'compute node provider and on the libvirt pGPU '
                         'providers that nova-compute creates.'),
            ('inventory', 'Additionally own one child provider per '
                          'passthrough GPU that Nova does not report '
                          '(legacy pci_passthrough:alias), with '
                          'CUSTOM_GPU_<MODEL> inventory.'),
        ],
        help="""
How the agent writes GPUs to Placement.

Related options:

* ``reserved_gpus``: only used in ``inventory`` mode.
"""),
    cfg.FloatOpt(
        'report_interval',
        default=30.0,
        min=1.0,
        help="""
Seconds between two agent cycles (discover, report to Placement, cast the
GPU state to the schedulers).

A health change is cast at once, whatever this interval.

Related options:

* ``[gpu_scheduler] state_ttl`` on the schedulers must be larger than this.
"""),
    cfg.FloatOpt(
        'metrics_interval',
        default=10.0,
        min=0.1,
        help="""
Seconds between two NVML metric samples (0.1 is 10 Hz).

Health is judged and Prometheus metrics are updated at each sample.
"""),
    cfg.StrOpt(
        'libvirt_uri',
        default='qemu:///system',
        help="""
libvirt connection URI used to discover PCI devices and mdev types.

``test:///path/to/host.xml`` uses libvirt's test driver (the simulator
and the tests do that).
"""),
    cfg.ListOpt(
        'inventory_sources',
        default=['libvirt', 'nvml', 'sysfs'],
        help="""
Inventory sources to merge, by name of their
``gpu_nova_ext.inventory.sources`` entry point.

Possible values:

* ``libvirt``: PCI devices, SR-IOV VFs, mdev types (libvirt-python)
* ``nvml``: NVIDIA facts, metrics and health (nvidia-ml-py)
* ``sysfs``: NVIDIA vendor-specific VFIO vGPU types on VFs
* ``simulated``: facts from ``simulated_gpus_file`` instead of NVML
"""),
    cfg.StrOpt(
        'simulated_gpus_file',
        help="""
YAML file of simulated GPU facts, metrics and health by PCI address, read
by the ``simulated`` inventory source.

It has the shape of a simulator scenario host's ``gpus:`` mapping.
"""),
    cfg.StrOpt(
        'sysfs_root',
        default='/sys',
        help="""
Root of the sysfs tree read by the ``sysfs`` inventory source.
"""),
    cfg.StrOpt(
        'nova_config_file',
        default='/etc/nova/nova.conf',
        help="""
This host's nova.conf, read for ``[devices] enabled_mdev_types`` and
``[mdev_<type>] device_addresses``: the vGPU type Nova offers on each GPU.

Files in ``nova_config_dir`` are read after it, as nova-compute does.
"""),
    cfg.StrOpt(
        'nova_config_dir',
        default='/etc/nova/nova.conf.d',
        help="""
Drop-in directory of this host's nova.conf.  Missing is fine.
"""),
    cfg.ListOpt(
        'extra_gpu_pci_ids',
        default=[],
        help="""
Additional PCI devices to treat as GPUs, as ``vendor_id:product_id`` in
hexadecimal (for example ``10de:2331``).

Display-class devices (PCI classes 0x0300, 0x0302 and 0x0380) of NVIDIA,
AMD and Intel are GPUs already; everything else (NICs, the BMC's VGA) is
ignored unless listed here.
"""),
    cfg.ListOpt(
        'reserved_gpus',
        default=[],
        help="""
PCI addresses (``0000:3b:00.0``) of GPUs that are reserved in ``inventory``
mode: their provider keeps ``reserved = 1`` so Placement hands them to
nobody, for example during maintenance.
"""),
    cfg.IntOpt(
        'compute_node_wait_timeout',
        default=0,
        min=0,
        help="""
Seconds the agent waits at start for nova-compute to create this host's
compute node provider; 0 waits for ever (retrying and logging).
"""),
    cfg.StrOpt(
        'scheduler_topic',
        default='gpu_nova_ext_scheduler',
        help="""
oslo.messaging topic on which the agent fanout-casts its GPU state to the
schedulers.  Must match ``[gpu_scheduler] state_topic`` in nova.conf.
"""),
    cfg.StrOpt(
        'agent_topic',
        default='gpu_nova_ext_agent',
        help="""
oslo.messaging topic on which the agent listens for ``resend_gpu_state``
from schedulers that start.  Must match ``[gpu_scheduler] agent_topic``.
"""),
    cfg.HostAddressOpt(
        'prometheus_bind_host',
        help="""
Address on which the Prometheus exporter listens.

Unset (the default), it is this host's management address: the address
of the interface that holds the default IPv4 route, as Nova's
``[DEFAULT] my_ip`` defaults to (127.0.0.1 when there is none).  The
metrics name the servers running on each GPU: do not publish them on
every interface (``0.0.0.0``, where Prometheus' node_exporter listens by
default) of a host whose other networks carry tenant traffic.  Not
loopback either: Prometheus scrapes from another host, over the
management network.

Related options:

* ``prometheus_port``: 0 disables the exporter.
* ``prometheus_tls_cert_file``, ``prometheus_basic_auth_file``: HTTPS and
  basic authentication.
"""),
    cfg.PortOpt(
        'prometheus_port',
        default=9835,
        help="""
Port of the Prometheus exporter; 0 disables the exporter.

NVIDIA's dcgm-exporter uses 9400; this default avoids it so both can run.
"""),
    cfg.StrOpt(
        'prometheus_tls_cert_file',
        help="""
PEM file of the exporter's TLS certificate (its chain after it): with
``prometheus_tls_key_file`` the exporter serves HTTPS only (TLS 1.2 or
later).  Unset (the default), plain HTTP.

Related options:

* ``prometheus_tls_key_file``: set both or neither.
"""),
    cfg.StrOpt(
        'prometheus_tls_key_file',
        help="""
PEM file of the unencrypted private key of ``prometheus_tls_cert_file``,
readable by the agent only.
"""),
    cfg.StrOpt(
        'prometheus_basic_auth_file',
        help="""
File of the users allowed to scrape, HTTP basic authentication: one
``user:bcrypt-hash`` line each, as ``htpasswd -nbB USER PASSWORD`` prints
(the hashes of ``basic_auth_users`` in a Prometheus exporter's web
configuration work as they are).  Re-read when it changes.  Unset (the
default), anyone who reaches the exporter may scrape.

Basic authentication sends the password with every scrape: use it with
``prometheus_tls_cert_file``.
"""),
    cfg.IntOpt(
        'prometheus_workers',
        default=4,
        min=1,
        max=64,
        help="""
Threads that answer Prometheus scrapes.  Requests are read by one thread
and answered by these; the exposition is rendered once per sample, so a
few threads serve many parallel scrapers.
"""),
    cfg.FloatOpt(
        'prometheus_idle_timeout',
        default=10.0,
        min=0.1,
        max=300.0,
        help="""
Seconds a scrape connection may take to send its request (and the
exporter to write the answer) before it is closed.  Half-open and slow
connections are closed after this time instead of being held.
"""),
    cfg.IntOpt(
        'prometheus_max_connections',
        default=128,
        min=1,
        max=10000,
        help="""
Connections whose request is not complete yet that the exporter keeps
open; beyond it the oldest is closed.
"""),
]


def register_opts(conf):
    utils.register_group(conf, agent_group)
    conf.register_opts(agent_opts, group=agent_group)


def list_opts():
    return {agent_group: agent_opts}
