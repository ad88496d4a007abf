# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext deploy-config``: a deploy tool's Nova configuration."""
import argparse
import os
import sys

from oslo_config import cfg

from gpu_nova_ext import files
from gpu_nova_ext.operator import deploy_config


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'deploy-config',
        help="Write a deploy tool's Nova configuration from the GPU hosts' "
             "drop-ins.",
        description=(
            "Read the drop-in 'gpu-nova-ext nova-conf --no-scheduler' wrote "
            "on each GPU compute host (one file per host, named after the "
            "host as the deploy tool's inventory names it: HOST.conf) and "
            "write where the deploy tool reads them: the [pci] alias "
            "entries and [filter_scheduler] pci_in_placement for every Nova "
            "service, the filters and weighers for nova-scheduler, and each "
            "host's own options for that host alone."))
    parser.add_argument(
        '--tool', required=True, choices=deploy_config.TOOLS,
        help='The deploy tool: kolla-ansible (files of /etc/kolla/config), '
             'openstack-ansible (group_vars and host_vars of '
             '/etc/openstack_deploy) or openstack-helm (a values file for '
             'the nova chart).')
    parser.add_argument(
        '--output', '-o', metavar='DIR',
        help='Write the files under DIR (kolla-ansible: /etc/kolla/config; '
             'openstack-ansible: /etc/openstack_deploy). Default: print '
             'them.')
    parser.add_argument(
        'drop_ins', nargs='+', metavar='HOST.conf',
        help="A GPU host's drop-in; the file name without .conf is the "
             'host.')
    parser.set_defaults(func=run)


def _host(path: str) -> str:
    name = os.path.basename(path)
    return name[:-len('.conf')] if name.endswith('.conf') else name


def run(args: argparse.Namespace, conf: cfg.ConfigOpts) -> int:
    options, notes = {}, {}
    for path in args.drop_ins:
        options[_host(path)], notes[_host(path)] = (
            deploy_config.read_drop_in(path))
    dep = deploy_config.deployment(options, notes)
    rendered = deploy_config.RENDERERS[args.tool](dep)
    for path, text in rendered.items():
        if not args.output:
            sys.stdout.write('# --- %s\n%s' % (path, text))
            continue
        target = os.path.join(args.output, path)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        files.write_atomic(target, text)
        print('Wrote %s' % target, file=sys.stderr)
    sys.stdout.flush()
    for note in dep.notes:
        print('NOTE: %s' % note, file=sys.stderr)
    return 0
