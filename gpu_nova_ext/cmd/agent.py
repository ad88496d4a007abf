# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-agent``: the compute-host GPU agent daemon."""
import argparse
import logging
import os
import sys

from gpu_nova_ext.cmd import common
from gpu_nova_ext import conf as gconf

PROG = 'gpu-nova-agent'


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog=PROG, description='GPU agent of gpu-nova-ext.')
    common.add_config_args(parser)
    if argv is None:
        common.use_native_threads()
    args = parser.parse_args(argv)

    def run():
        conf = common.load_config(args, PROG,
                                  register=gconf.register_agent_opts)
        from gpu_nova_ext import privsep
        # the privileged daemon's start command names these config files
        privsep.init(conf)
        from gpu_nova_ext.agent import service
        return service.AgentService(conf).run()

    rc = common.run_guarded(run, args.debug, PROG)
    if argv is None:
        # A daemon told to stop (SIGTERM) exits now: not after the threads
        # it abandoned (a Placement request that never returns, a RabbitMQ
        # connection still closing) nor after the interpreter's teardown of
        # every module, which takes most of a second on a busy host.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


if __name__ == '__main__':
    sys.exit(main())
