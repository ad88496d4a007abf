"""``gpu-nova-ext report``."""
from gpu_nova_ext import exception


def register(subparsers):
    parser = subparsers.add_parser(
        'report', help='Not implemented yet.')
    parser.set_defaults(func=run)


def run(args, conf):
    raise exception.NotImplementedYet(what="'gpu-nova-ext report'")
