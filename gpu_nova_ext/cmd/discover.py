# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext discover``: print this host's GPU inventory.

``-f table`` (default) is for people: a row per GPU, its vGPU types
indented under it, then, on a host of several GPUs, the topology matrix
``nvidia-smi topo -m`` prints (design doc: Topology); ``-f json`` (or
``yaml``) prints ``{"host": ..., "gpus": [...], "warnings": [...],
"notes": [...]}`` with the state payload's GPU objects (``numa_node``,
``pci_switch``, ``link_domain``) plus each GPU's ``nvlink_peers`` and
``xgmi_hive``; ``csv`` and ``value`` the table's rows; ``-c`` picks
columns (:mod:`gpu_nova_ext.text_table`, design doc: Operator CLI).
Every format says what discovery skipped (``warnings``: devices skipped or
degraded) and which GPU-vendor PCI functions it does not offer, and why
(``notes``): ``csv`` and ``value`` on stderr.

Without a GPU, try the shipped sample host::

    gpu-nova-ext discover --nvml none --libvirt-uri \\
        test:///<site-packages>/gpu_nova_ext/inventory/samples/a100-vgpu-host.xml
"""
import os

from gpu_nova_ext.inventory import manager
from gpu_nova_ext.inventory import topology
from gpu_nova_ext import text_table

SAMPLE_HOST = os.path.join(os.path.dirname(os.path.dirname(__file__)),
                           'inventory', 'samples', 'a100-vgpu-host.xml')


def register(subparsers):
    parser = subparsers.add_parser(
        'discover', help="Print this host's GPU inventory.",
        description="Discover this host's GPUs through the configured "
                    "inventory sources ([agent] inventory_sources) and "
                    "print them. Sample host without a GPU: "
                    "--libvirt-uri test://%s" % SAMPLE_HOST)
    parser.add_argument(
        '--libvirt-uri', metavar='URI',
        help='libvirt URI instead of [agent] libvirt_uri, e.g. '
             'test:///path/host.xml for libvirt\'s test driver.')
    parser.add_argument(
        '--nvml', choices=('auto', 'none'), default='auto',
        help='auto: use NVML when it is a configured source and the NVIDIA '
             'driver is there; none: skip NVML.')
    text_table.add_arguments(
        parser, document='{"host", "gpus": [the state payload\'s GPU '
        'objects], "warnings", "notes"}', rows='a row per GPU (warnings '
        'and notes on stderr)')
    parser.set_defaults(func=run)


def run(args, conf) -> int:
    if args.libvirt_uri:
        conf.set_override('libvirt_uri', args.libvirt_uri, group='agent')
    sources = list(conf.agent.inventory_sources)
    if args.nvml == 'none':
        sources = [s for s in sources if s != 'nvml']
    inventory = manager.discover(conf, sources=sources)
    text_table.emit(args, listing(inventory))
    return 0


#: the table's columns, one per fact of a GPU
COLUMNS = ('pci_address', 'vendor', 'model', 'memory', 'mode', 'offered',
           'vfs', 'numa', 'driver', 'cc', 'health')


def listing(inventory) -> text_table.Listing:
    """A row per GPU; under it in the table, its vGPU types and health."""
    rows = []
    details = []
    for gpu in inventory.gpus:
        memory = ('%d MiB' % gpu.memory_mib if gpu.memory_mib is not None
                  else None)
        rows.append([gpu.pci_address, _fmt(gpu.vendor), _fmt(gpu.model),
                     memory, _fmt(gpu.mode), _fmt(gpu.offered_vgpu_type),
                     len(gpu.vfs), gpu.numa_node,
                     _fmt(gpu.driver_version or gpu.kernel_driver),
                     _fmt(gpu.cuda_cc), gpu.health.state])
        subs = [[t.id, t.name, '%d MiB' % t.framebuffer_mib
                 if t.framebuffer_mib else None,
                 # last: a cell of its own would pad every other row
                 'available %s of %s%s' % (
                     t.available,
                     text_table.MISSING if t.max is None else t.max,
                     '  (offered)' if t.id == gpu.offered_vgpu_type
                     else '')]
                for t in gpu.merged_vgpu_types()]
        if gpu.health.reasons:
            # last too: a long line widens no column of the vGPU types
            subs.append(['health:', '', '', ', '.join(gpu.health.reasons)])
        details.append(subs)
    document = inventory.to_dict()
    for gpu, entry in zip(inventory.gpus, document['gpus']):
        entry['nvlink_peers'] = dict(gpu.nvlink_peers)
        entry['xgmi_hive'] = gpu.xgmi_hive
    document.update(warnings=list(inventory.warnings),
                    notes=list(inventory.notes))
    title = ['Host %s: %d GPU(s)' % (inventory.host, len(inventory.gpus))]
    messages = (['warning: %s' % w for w in inventory.warnings] +
                ['note: %s' % n for n in inventory.notes])

    def report():
        # the GPU table, then the topology matrix
        body = text_table.lines([text_table.heading(c) for c in COLUMNS],
                                rows, details)
        return '\n'.join(title + body + [''] +
                         topology_lines(inventory.gpus) + messages)

    return text_table.Listing(
        columns=COLUMNS, rows=rows, details=details, title=title,
        empty='(no GPU found)', messages=messages, document=document,
        report=report if len(inventory.gpus) > 1 else None)


#: under the matrix, as ``nvidia-smi topo -m`` explains its cells
LEGEND = ['Legend: X = itself, NV# = # NVLinks (direct or through '
          'NVSwitches),',
          '        XGMI = one AMD xGMI hive, PIX = behind the same PCIe '
          'switch,',
          '        NODE = same NUMA node, SYS = across NUMA nodes, '
          '- = unknown']


def topology_lines(gpus) -> list[str]:
    """The ``nvidia-smi topo -m`` style matrix, GPUs in address order."""
    ordered = sorted(gpus, key=lambda g: g.pci_address)
    labels = ['GPU%d' % i for i in range(len(ordered))]
    headers = [''] + labels + ['PCI address', 'NUMA', 'Link domain',
                               'PCI switch']
    rows = [[label] + cells + [gpu.pci_address, gpu.numa_node,
                               gpu.link_domain, gpu.pci_switch]
            for label, cells, gpu in zip(labels, topology.matrix(ordered),
                                         ordered)]
    return text_table.lines(headers, rows) + [''] + LEGEND


def _fmt(value):
    """None for a missing value (the table prints ``-``, csv nothing)."""
    return None if value == '' else value
