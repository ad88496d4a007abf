# SPDX-License-Identifier: Apache-2.0

"""Tests run Nova in its native threading mode (as nova-scheduler does in
Nova 34 and as our agent does): Nova's functional harness would otherwise
monkey-patch the whole test process with eventlet on import, and real
servers (the embedded Placement, RabbitMQ consumers) block under it."""
import os
import sys

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

if 'eventlet' not in sys.modules:
    # Test runners import this package first.  A tool (tools/bench-*)
    # that imported eventlet through some library before reusing test
    # helpers only needs no patching, which is what it gets.
    from nova import monkey_patch

    monkey_patch.patch()
