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

"""End-to-end tests in Nova's own functional harness.

Servers are booted through Nova's real API, conductor, scheduler and
Placement (libvirt driver on Nova's fakelibvirt), with gpu_nova_ext's
filters and weighers enabled through nova.conf and our agent writing to
that Placement and casting its state through the harness's transport.

Nova runs here in its native threading mode (``gpu_nova_ext/tests``
sets that up before anything imports Nova): no eventlet monkey patching
of the test process.
"""
