"""``gpu-nova-agent``: the compute-host GPU agent daemon."""
import argparse
import sys

from gpu_nova_ext.cmd import common
from gpu_nova_ext import exception

PROG = 'gpu-nova-agent'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description='GPU agent of gpu-nova-ext.')
    common.add_config_args(parser)
    args = parser.parse_args(argv)

    def run():
        common.load_config(args, PROG)
        raise exception.NotImplementedYet(what='gpu-nova-agent')

    return common.run_guarded(run, args.debug, PROG)


if __name__ == '__main__':
    sys.exit(main())
