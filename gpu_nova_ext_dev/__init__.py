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

"""Development only: stand-ins for what this machine lacks.

Not part of the ``gpu-nova-ext`` distribution (``setup.cfg`` lists only
``gpu_nova_ext``), so no production host installs it.  ``tools/run``
puts the work tree on its development venv's path (a ``.pth`` file).

``fakes``: a fake NVML library and a fake amdgpu/xe sysfs tree;
``libvirt_hosts``: a compute host as Nova's fakelibvirt and libvirt's
test driver see it; ``cloud``: the development cloud of real OpenStack
processes (``tools/run cloud``).
"""
