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

"""``gpu-nova-ext discover``: print this host's GPU inventory.

``--format table`` (default) is for people, ``--format json`` prints
``{"host": ..., "gpus": [...], "warnings": [...], "notes": [...]}`` with
the state payload's GPU objects (design doc: Operator CLI).  Both formats
say what discovery skipped (``warnings``: devices skipped or degraded)
and which GPU-vendor PCI functions it does not offer, and why (``notes``).

Without a GPU, try the shipped sample host::

    gpu-nova-ext discover --nvml none --libvirt-uri \\
        test:///<site-packages>/gpu_nova_ext/inventory/samples/a100-vgpu-host.xml
"""
import json
import os
import sys

from gpu_nova_ext.inventory import manager
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
    parser.add_argument(
        '--format', choices=('table', 'json'), default='table',
        help='Output format (default: table).')
    parser.set_defaults(func=run)


def run(args, conf) -> int:
    if args.libvirt_uri:
        conf.set_override('libvirt_uri', args.libvirt_uri, group='agent')
    sources = list(conf.agent.inventory_sources)
    if args.nvml == 'none':
        sources = [s for s in sources if s != 'nvml']
    inventory = manager.discover(conf, sources=sources)
    if args.format == 'json':
        data = inventory.to_dict()
        data.update(warnings=list(inventory.warnings),
                    notes=list(inventory.notes))
        json.dump(data, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write('\n')
    else:
        sys.stdout.write(format_table(inventory))
    return 0


def _fmt(value) -> str:
    return '-' if value is None or value == '' else str(value)


def format_table(inventory) -> str:
    """A readable table: one row per GPU, its vGPU types indented below."""
    header = ('PCI ADDRESS', 'VENDOR', 'MODEL', 'MEMORY', 'MODE', 'OFFERED',
              'VFS', 'NUMA', 'DRIVER', 'CC', 'HEALTH')
    rows = []
    for gpu in inventory.gpus:
        memory = ('%d MiB' % gpu.memory_mib if gpu.memory_mib is not None
                  else None)
        rows.append((gpu.pci_address, _fmt(gpu.vendor), _fmt(gpu.model),
                     _fmt(memory), _fmt(gpu.mode),
                     _fmt(gpu.offered_vgpu_type), str(len(gpu.vfs)),
                     _fmt(gpu.numa_node),
                     _fmt(gpu.driver_version or gpu.kernel_driver),
                     _fmt(gpu.cuda_cc), gpu.health.state))
    table = text_table.lines(header, rows)
    lines = ['Host %s: %d GPU(s)' % (inventory.host, len(inventory.gpus)),
             table[0]]
    for gpu, row in zip(inventory.gpus, table[1:]):
        lines.append(row)
        for t in gpu.merged_vgpu_types():
            fb = ('%d MiB' % t.framebuffer_mib if t.framebuffer_mib
                  else '-')
            lines.append('    %s %-16s %10s  available %s of %s%s' % (
                t.id.ljust(12), _fmt(t.name), fb, t.available, _fmt(t.max),
                '  (offered)' if t.id == gpu.offered_vgpu_type else ''))
        if gpu.health.reasons:
            lines.append('    health: %s' % ', '.join(gpu.health.reasons))
    if not inventory.gpus:
        lines.append('(no GPU found)')
    for warning in inventory.warnings:
        lines.append('warning: %s' % warning)
    for note in inventory.notes:
        lines.append('note: %s' % note)
    return '\n'.join(lines) + '\n'
