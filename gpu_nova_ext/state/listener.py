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

"""The life of a scheduler's state listener (design doc: State protocol).

:class:`StateListener` runs one :class:`gpu_nova_ext.state.rpc.
SchedulerStateServer` per process for the state cache:

* started by the first GPU filter or weigher that runs in a
  nova-scheduler process (``[gpu_scheduler] state_listener``), or by
  :meth:`start` (tools, the simulator);
* stopped by :meth:`stop`, at process exit, and (when a plugin started
  it) once every GPU filter and weigher instance is garbage-collected
  (Nova drops them with the scheduler's HostManager): no thread is left
  behind;
* a fork's child starts its own (nova-scheduler forks its workers).

The first request after the start may wait for the agents' answers to
the start's ``resend_gpu_state``: as long as answers keep arriving, and
only ``quiet`` seconds when none arrives (a cloud without agents).
"""
import atexit
import os
import threading
import time
import weakref

from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class StateListener:
    """The state RPC server of one cache in one process."""

    def __init__(self, sink) -> None:
        self._sink = sink
        self._lock = threading.Lock()
        self._server = None
        self._pid = None
        self._failed_pid = None
        self._owners = 0
        # started by a plugin (ensure_started): stops with the plugins
        self._by_plugins = False
        self._arrived = threading.Condition()
        self._count = 0
        self._exit_hook = False

    @property
    def running(self) -> bool:
        return self._server is not None and self._pid == os.getpid()

    def start(self, conf) -> None:
        """Run the server in this process; idempotent.

        Raises what the RPC layer raises (a bad ``transport_url``).
        """
        with self._lock:
            if self.running:
                return
            from gpu_nova_ext.state import rpc
            server = rpc.SchedulerStateServer(conf, self._sink)
            server.start()
            self._server, self._pid = server, os.getpid()
            self._by_plugins = False
            if not self._exit_hook:
                atexit.register(self.stop)
                self._exit_hook = True

    def stop(self) -> None:
        """Stop this process's server and wait for its threads."""
        with self._lock:
            server, self._server = self._server, None
            pid, self._pid = self._pid, None
        if server is not None and pid == os.getpid():
            server.stop()

    def ensure_started(self, conf) -> bool:
        """Start once per process when ``state_listener``; never raises.

        :returns: True when this call started it.
        """
        pid = os.getpid()
        if self.running or not conf.gpu_scheduler.state_listener:
            return False
        if self._failed_pid == pid:
            return False
        try:
            self.start(conf)
        except Exception as exc:
            self._failed_pid = pid
            LOG.error('GPU state listener could not start (%s); GPU '
                      'filters and weighers run without live GPU state '
                      'until nova-scheduler restarts. Check transport_url '
                      'and [gpu_scheduler].', exc)
            return False
        self._by_plugins = True
        return True

    def attach(self, owner) -> None:
        """Count ``owner`` (a plugin instance) as a user of the server.

        When every owner is garbage-collected, the server stops.
        """
        with self._lock:
            self._owners += 1
        weakref.finalize(owner, self._detach)

    def _detach(self) -> None:
        with self._lock:
            self._owners -= 1
            last = self._owners <= 0 and self._by_plugins
        if last:
            self.stop()

    def ask_resend(self, host: str | None = None) -> None:
        """Ask one host's agent (None: every agent) to resend its facts."""
        server = self._server
        if server is not None and self._pid == os.getpid():
            server.ask_resend(host)

    def arrived(self) -> None:
        """What the cache calls for each stored message."""
        with self._arrived:
            self._count += 1
            self._arrived.notify_all()

    def wait(self, timeout: float, quiet: float = 0.25) -> int:
        """Wait while messages keep arriving; return how many arrived.

        Returns ``quiet`` seconds after the last one (or after the call
        when none arrives), at the latest after ``timeout``.  Real time.
        """
        start = self._count
        deadline = time.monotonic() + timeout
        with self._arrived:
            seen = start
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(min(quiet, left))
                if self._count == seen:
                    break
                seen = self._count
        return self._count - start
