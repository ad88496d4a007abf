# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext``: the operator CLI.

Each sub-command lives in its own module of :mod:`gpu_nova_ext.cmd` with
``register(subparsers)`` (which sets ``func(args, conf) -> int``).
"""
import argparse
import importlib
import sys

from gpu_nova_ext.cmd import common

PROG = 'gpu-nova-ext'
COMMANDS = ('discover', 'report', 'simulate', 'nova_conf', 'deploy_config',
            'ops_remediate', 'mig')


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description='GPU-aware scheduling for OpenStack Nova and Placement.')
    common.add_config_args(parser)
    subparsers = parser.add_subparsers(dest='command', metavar='COMMAND')
    subparsers.required = True
    for name in COMMANDS:
        module = importlib.import_module('gpu_nova_ext.cmd.' + name)
        module.register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:
        common.use_native_threads()
    parser = build_parser()
    args = parser.parse_args(argv)

    def run():
        conf = common.load_config(args, PROG)
        return args.func(args, conf)

    return common.run_guarded(run, args.debug, PROG)


if __name__ == '__main__':
    sys.exit(main())
