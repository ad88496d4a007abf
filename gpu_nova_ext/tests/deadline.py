# SPDX-License-Identifier: Apache-2.0

"""The one deadline every wait in the tests is bounded by.

A test that waits for something another thread or process does (a
server turning ACTIVE, a cast reaching a cache, a daemon starting) polls
until it happened or :data:`WAIT_S` seconds have passed.  The deadline is
generous, for a 2-core machine held busy by other work: it only decides
how long a test that is going to fail takes to say so.  A passing wait
never sleeps longer than one :data:`POLL_S` after what it waits for has
happened, so a quiet machine does not pay for it.

``GPU_NOVA_EXT_TEST_WAIT_S`` overrides the deadline (seconds).

Tests that still depend on timing, because a duration is what they test:

* ``functional.state.test_rpc_processes``: a cast and a late cache's
  resend reach every cache within ``ROUND_TRIP`` (2 s); a cache stops
  within 3 s; during a broker outage the agents' casts fail within 10 s.
* ``functional.placement.test_agent``: the agent daemon stops within 2 s
  (in a thread, and at SIGTERM); with ``compute_node_wait_timeout`` 1 it
  gives up within 5 s.
* ``functional.state.test_rpc_channel`` ``test_stale_state_counts_as_
  missing``: with ``state_ttl`` 1 s the test must see the host live
  within 1 s of its state's arrival.
* ``functional.nova.test_vgpu`` ``test_first_gpu_request_after_scheduler_
  restart`` (passed at load 30-45): ``[gpu_scheduler]
  startup_state_wait`` ends a quarter of a second after the listener
  starts when no agent has answered yet.
* Checks that something does *not* happen can only miss it on a slow
  machine, never fail: no second remediation trigger within 0.2 s
  (``unit.operator.test_remediate_daemon``), another host's agent not
  asked (``test_rpc_channel.TestProtocol11``).

The polling is tenacity's (already installed with oslo.messaging and
Nova): a fixed wait between tries, and a stop at the deadline measured on
the monotonic clock.  The clock and the sleep are this module's
:data:`monotonic` and :data:`sleep`, not tenacity's reads of the
``time`` module, so a test can simulate them without also simulating
them for every other thread in the process (a leaked thread's sleeps
once moved a simulated clock by 90 s).
"""
import os
import time

import tenacity

#: seconds a test waits for anything before it fails
WAIT_S = float(os.environ.get('GPU_NOVA_EXT_TEST_WAIT_S', '180'))
#: seconds between two polls of a wait
POLL_S = 0.05
#: the longest pause between two polls of a wait that backs off
#: (:func:`wait_for`'s ``backoff``): Nova's own harness polls its API
#: every 0.5 s
BACKOFF_MAX_S = 0.5
#: the clock a wait's deadline is measured on
monotonic = time.monotonic
#: how a wait sleeps between two polls
sleep = time.sleep


def _retrying(interval: float, backoff: bool = False,
              **kw) -> tenacity.Retrying:
    end = monotonic() + WAIT_S
    wait = (tenacity.wait_exponential(multiplier=interval,
                                      max=BACKOFF_MAX_S)
            if backoff else tenacity.wait_fixed(interval))
    return tenacity.Retrying(stop=lambda state: monotonic() >= end,
                             wait=wait, sleep=sleep, **kw)


def wait_for(predicate, interval: float = POLL_S, backoff: bool = False):
    """Poll ``predicate`` until it returns a truthy value or the deadline.

    Returns its last value: truthy on success, falsy when the deadline
    passed (the caller says what did not happen).  With ``backoff`` the
    pause doubles after each poll, from ``interval`` up to
    :data:`BACKOFF_MAX_S`: for a costly predicate (a call through Nova's
    API, served by the same process and GIL as the services doing the
    work), so a long wait does not slow down what it waits for.
    """
    return _retrying(
        interval, backoff,
        retry=tenacity.retry_if_result(lambda value: not value),
        retry_error_callback=lambda state: state.outcome.result())(predicate)


def until_passes(check, interval: float = POLL_S, backoff: bool = False):
    """Call ``check`` until it raises no AssertionError; its result.

    At the deadline the last AssertionError is raised as it is.
    ``backoff`` as for :func:`wait_for`.
    """
    return _retrying(
        interval, backoff,
        retry=tenacity.retry_if_exception_type(AssertionError),
        reraise=True)(check)
