# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext nova-conf``: a nova.conf drop-in from this host's GPUs."""
import argparse
import sys

from oslo_config import cfg

from gpu_nova_ext import files
from gpu_nova_ext.operator import nova_conf

NUMA_POLICIES = ('required', 'legacy', 'preferred', 'socket')


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'nova-conf',
        help="Write a nova.conf drop-in for this host's GPUs.",
        description=(
            "Discover this host's GPUs and write an oslo.config drop-in for "
            "/etc/nova/nova.conf.d/: [pci] device_spec (resource_class and "
            "traits tags) and alias for passthrough and vendor-VFIO vGPU, "
            "[devices] enabled_mdev_types and [mdev_<type>] sections for "
            "mdev vGPU, and the [filter_scheduler] options that load "
            "gpu-nova-ext's filters and weighers."))
    parser.add_argument(
        '--libvirt-uri', metavar='URI',
        help='libvirt URI to discover from (default: [agent] libvirt_uri).')
    parser.add_argument(
        '--output', '-o', metavar='FILE',
        help='Write to FILE instead of standard output.')
    parser.add_argument(
        '--vgpu-type', action='append', default=[], metavar='TYPE',
        help='vGPU type to offer (mdev type id such as nvidia-471 or name '
             'such as A100D-10C); may be repeated, in order of preference. '
             'Default: the type Nova offers now, else the first listed.')
    parser.add_argument(
        '--no-pci-in-placement', dest='pci_in_placement',
        action='store_false',
        help='Do not report PCI devices in Placement (legacy PCI tracking).')
    parser.add_argument(
        '--no-scheduler', dest='scheduler', action='store_false',
        help='Leave out the [filter_scheduler] and [scheduler] sections.')
    parser.add_argument(
        '--placement-conf', action='store_true',
        help='Write the placement.conf drop-in we recommend instead '
             '(breadth-first allocation candidates with a cap, the wide '
             'provider tree workaround; for every Placement API server), '
             'each option with a comment saying why.  Discovers nothing.')
    parser.add_argument(
        '--max-instances', action='store_true',
        help='Also write [mdev_<type>] max_instances: the sum of the '
             "type's maximum over its GPUs (a hard cap; regenerate after "
             'adding GPUs).')
    parser.add_argument(
        '--vgpu-class', choices=nova_conf.VGPU_CLASSES, default='model',
        help='[mdev_<type>] mdev_class: model (default) gives each GPU '
             "model's vGPUs their own class CUSTOM_VGPU_<MODEL> (quota per "
             "model; flavors ask resources:CUSTOM_VGPU_<MODEL>); vgpu keeps "
             "Nova's VGPU (flavors asking resources:VGPU keep working).")
    parser.add_argument(
        '--numa-policy', choices=NUMA_POLICIES,
        help='numa_policy of the generated [pci] alias entries.')
    parser.set_defaults(func=run)


def options_from_args(args: argparse.Namespace
                      ) -> nova_conf.GeneratorOptions:
    return nova_conf.GeneratorOptions(
        vgpu_types=tuple(args.vgpu_type),
        pci_in_placement=args.pci_in_placement,
        scheduler=args.scheduler,
        numa_policy=args.numa_policy,
        max_instances=args.max_instances,
        vgpu_class=args.vgpu_class)


def run(args: argparse.Namespace, conf: cfg.ConfigOpts) -> int:
    from gpu_nova_ext.inventory import manager

    if args.placement_conf:
        from gpu_nova_ext.operator import scale_settings
        text = scale_settings.placement_conf()
        if not args.output or args.output == '-':
            sys.stdout.write(text)
        else:
            files.write_atomic(args.output, text)
            print('Wrote %s (Placement settings).' % args.output,
                  file=sys.stderr)
        return 0
    if args.libvirt_uri:
        conf.set_override('libvirt_uri', args.libvirt_uri, group='agent')
    from gpu_nova_ext.agent import mig_layout

    options = options_from_args(args)
    inventory = manager.discover(conf)
    # [mig] host_layouts over layouts; aggregate_layouts only the agent
    # can resolve (a note says so)
    options.mig_layouts, mig_notes = mig_layout.layouts_for_host(
        conf, {gpu.model for gpu in inventory.gpus})
    drop = nova_conf.generate(inventory, options)
    drop.notes.extend(mig_notes)
    text = drop.render()
    if not args.output or args.output == '-':
        sys.stdout.write(text)
        return 0
    files.write_atomic(args.output, text)
    print('Wrote %s for %d GPU(s) of %s.' % (
        args.output, len(inventory.gpus), inventory.host), file=sys.stderr)
    return 0
