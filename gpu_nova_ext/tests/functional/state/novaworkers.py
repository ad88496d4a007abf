# SPDX-License-Identifier: Apache-2.0

"""nova-scheduler's process model around the GPU state cache.

``python -m gpu_nova_ext.tests.functional.state.novaworkers --state-topic T
--agent-topic A --exchange E --expect h1,h2 [--workers 2]``

Does what ``nova-scheduler`` (nova 34) does before its service code:
native threading mode (``monkey_patch.patch(backend='threading')``, which
forbids importing eventlet), Nova's global CONF, and oslo.service's
launcher forking worker processes.  In each worker the first "filter call"
starts the cache's listener (``ensure_started(CONF)``) on Nova's
transport_url; the worker prints ``{"worker": pid, "hosts": [...], ...}``
once it holds the ``--expect`` hosts.  SIGTERM stops the launcher.
"""
# As nova/cmd/scheduler.py: before anything imports eventlet.
from nova import monkey_patch; monkey_patch.patch(backend='threading')  # noqa

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402

import nova.conf  # noqa: E402
from nova import config  # noqa: E402
from oslo_service import service as oslo_service  # noqa: E402

from gpu_nova_ext import conf as gconf  # noqa: E402
from gpu_nova_ext.state import cache as state_cache  # noqa: E402
from gpu_nova_ext.tests import deadline  # noqa: E402
from gpu_nova_ext.tests.functional.state import support  # noqa: E402

CONF = nova.conf.CONF
_OUT = None

NOVA_CONF = """
[DEFAULT]
transport_url = %(url)s
control_exchange = %(exchange)s

[oslo_messaging_rabbit]
amqp_auto_delete = true

[gpu_scheduler]
state_topic = %(state_topic)s
agent_topic = %(agent_topic)s
"""


class SchedulerWorker(oslo_service.Service):

    def __init__(self, expect):
        super().__init__()
        self.expect = expect
        self.stopped = threading.Event()

    def start(self):
        super().start()
        threading.Thread(target=self._first_request, daemon=True).start()

    def _first_request(self):
        cache = state_cache.get_cache()
        cache.ensure_started(CONF)
        seen = deadline.wait_for(
            lambda: self.expect <= set(cache.hosts()))
        _OUT.write(json.dumps({
            'worker': os.getpid(), 'started': cache.listener.running,
            'hosts': cache.hosts(), 'complete': bool(seen),
            'eventlet_imported': 'eventlet' in sys.modules,
            'threads': sorted({t.name.split('-')[0]
                               for t in threading.enumerate()})}) + '\n')
        _OUT.flush()

    def stop(self, graceful=False):
        state_cache.get_cache().stop()
        super().stop(graceful)


def main() -> int:
    global _OUT
    parser = argparse.ArgumentParser()
    parser.add_argument('--url', default=support.TRANSPORT_URL)
    parser.add_argument('--state-topic', required=True)
    parser.add_argument('--agent-topic', required=True)
    parser.add_argument('--exchange', required=True)
    parser.add_argument('--expect', required=True)
    parser.add_argument('--workers', type=int, default=2)
    args = parser.parse_args()
    _OUT = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    # A nova.conf as an operator writes it, parsed the way nova-scheduler
    # parses its own (Nova's rpc.init included).
    with tempfile.NamedTemporaryFile('w', suffix='.conf',
                                     delete=False) as handle:
        handle.write(NOVA_CONF % vars(args))
    gconf.register_nova_opts(CONF)
    config.parse_args(['nova-scheduler', '--config-file', handle.name],
                      configure_db=False)
    os.unlink(handle.name)
    launcher = oslo_service.launch(
        CONF, SchedulerWorker(set(args.expect.split(','))),
        workers=args.workers, restart_method='mutate')
    launcher.wait()
    return 0


if __name__ == '__main__':
    sys.exit(main())
