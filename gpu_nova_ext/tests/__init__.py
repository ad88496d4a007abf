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
