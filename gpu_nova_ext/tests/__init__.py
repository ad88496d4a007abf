"""Tests run Nova in its native threading mode (as nova-scheduler does in
Nova 34 and as our agent does): Nova's functional harness would otherwise
monkey-patch the whole test process with eventlet on import, and real
servers (the embedded Placement, RabbitMQ consumers) block under it."""
import os

os.environ.setdefault('OS_NOVA_DISABLE_EVENTLET_PATCHING', '1')

from nova import monkey_patch  # noqa: E402

monkey_patch.patch()
