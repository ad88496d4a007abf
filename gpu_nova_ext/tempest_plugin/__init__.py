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


"""The GPU tests an operator runs with Tempest after a deploy.

Tempest loads :class:`.plugin.GpuNovaExtTempestPlugin` by the
``tempest.test_plugins`` entry point; the tests are in ``tests/``, the
options (``[gpu_nova_ext]`` of tempest.conf) in :mod:`.config`, and what
the tests decide without a cloud (which flavors are GPU flavors, which
allocations are GPUs) in :mod:`.gpus`.  doc/source/tempest.rst.
"""
