"""``gpu-nova-agent``: the compute-host GPU agent daemon."""
import argparse
import sys

from gpu_nova_ext.cmd import common
from gpu_nova_ext import conf as gconf

PROG = 'gpu-nova-agent'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description='GPU agent of gpu-nova-ext.')
    common.add_config_args(parser)
    args = parser.parse_args(argv)

    def run():
        conf = common.load_config(args, PROG,
                                  register=gconf.register_agent_opts)
        from gpu_nova_ext.agent import service
        return service.AgentService(conf).run()

    return common.run_guarded(run, args.debug, PROG)


if __name__ == '__main__':
    sys.exit(main())
