# SPDX-License-Identifier: Apache-2.0

"""One side of the state channel in its own process, driven over stdio.

``python -m gpu_nova_ext.tests.functional.state.stateproc agent|scheduler
--state-topic T --agent-topic A [--host H] [--interval S] [--ttl S]``

It prints one JSON object per line on stdout: ``{"ready": ...}`` once
started, then one answer per command read from stdin:

* agent: ``cast`` (cast now, as on a health change) -> ``{"cast": ok}``;
  ``stats`` -> ``{"resends": n, "ok": n, "failed": n}``.  Besides, it casts
  every ``--interval`` seconds and at once when a scheduler asks.
* scheduler (a real GpuStateCache): ``hosts`` -> ``{"hosts": {host:
  generated_at}}`` for the hosts with live state.
* workers: forks ``--workers`` children that each start the cache
  singleton's listener the way a filter does (``ensure_started``), wait
  for the ``--expect`` hosts, print ``{"worker": pid, "hosts": [...]}``
  and exit; then ``{"exit_codes": [...]}``.
* agent, scheduler: ``quit`` -> ``{"stopped": seconds_stop_took}``, then exit.
"""
import argparse
import json
import os
import sys
import threading
import time

from oslo_log import log as logging

from gpu_nova_ext.agent import state_client
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.state import support


# The protocol's stream; logs and anything else printed go to stderr.
_OUT = None


def _say(**obj) -> None:
    _OUT.write(json.dumps(obj) + '\n')
    _OUT.flush()


def _commands():
    for line in sys.stdin:
        line = line.strip()
        if line:
            yield line


def run_agent(args, conf) -> None:
    stats = {'resends': 0, 'ok': 0, 'failed': 0}
    lock = threading.Lock()
    wake = threading.Event()
    done = threading.Event()
    state = support.payload(args.host)

    def on_resend():
        with lock:
            stats['resends'] += 1
        wake.set()

    client = state_client.AgentStateClient(conf, on_resend)

    def cast() -> bool:
        with lock:
            state['generated_at'] = time.time()
            body = dict(state)
        ok = client.cast_state(body)
        with lock:
            stats['ok' if ok else 'failed'] += 1
        return ok

    def loop():
        # The agent's cycle: every interval, and at once when asked.
        while not done.is_set():
            wake.wait(args.interval)
            if done.is_set():
                return
            wake.clear()
            cast()

    client.start()
    cast()
    worker = threading.Thread(target=loop, daemon=True)
    worker.start()
    _say(ready=True, host=args.host)
    for command in _commands():
        if command == 'cast':
            _say(cast=cast())
        elif command == 'stats':
            with lock:
                _say(**stats)
        elif command == 'quit':
            break
    done.set()
    wake.set()
    worker.join(deadline.WAIT_S)
    started = time.monotonic()
    client.stop()
    _say(stopped=time.monotonic() - started)


def run_scheduler(args, conf) -> None:
    cache = state_cache.GpuStateCache(conf)
    started = time.monotonic()
    cache.start(conf)
    _say(ready=True, start_s=time.monotonic() - started)
    for command in _commands():
        if command == 'hosts':
            hosts = {}
            for host in cache.hosts():
                live = cache.get(host)
                if live is not None:
                    hosts[host] = live['generated_at']
            _say(hosts=hosts)
        elif command == 'quit':
            break
    started = time.monotonic()
    cache.stop()
    _say(stopped=time.monotonic() - started)


def run_workers(args, conf) -> None:
    """Fork workers the way nova-scheduler does.

    The parent forks before any filter ran; each worker's first filter
    call starts its own listener.
    """
    cache = state_cache.get_cache()   # the singleton, not started
    expect = set(args.expect.split(','))
    pids = []
    for _ in range(args.workers):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                cache.ensure_started(conf)
                seen = deadline.wait_for(
                    lambda: expect <= set(cache.hosts()))
                _say(worker=os.getpid(), started=cache.listener.running,
                     hosts=cache.hosts())
                cache.stop()
                code = 0 if seen else 3
            finally:
                os._exit(code)
        pids.append(pid)
    codes = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
             for pid in pids]
    _say(parent_started=cache.listener.running, exit_codes=codes)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument('role', choices=['agent', 'scheduler', 'workers'])
    parser.add_argument('--url', default=support.TRANSPORT_URL)
    parser.add_argument('--state-topic', required=True)
    parser.add_argument('--agent-topic', required=True)
    parser.add_argument('--host', default='cmp-0')
    parser.add_argument('--interval', type=float, default=3600.0)
    parser.add_argument('--exchange')
    parser.add_argument('--ttl', type=float, default=120.0)
    parser.add_argument('--workers', type=int, default=2)
    parser.add_argument('--expect', default='')
    args = parser.parse_args(argv)
    global _OUT
    _OUT = os.fdopen(os.dup(1), 'w')
    os.dup2(2, 1)
    conf = support.make_conf(args.url, args.state_topic, args.agent_topic,
                             host=args.host, exchange=args.exchange,
                             state_ttl=args.ttl)
    logging.setup(conf, 'stateproc-%s' % args.role)
    if args.role == 'agent':
        run_agent(args, conf)
    elif args.role == 'workers':
        run_workers(args, conf)
    else:
        run_scheduler(args, conf)
    return 0


if __name__ == '__main__':
    sys.exit(main())
