# SPDX-License-Identifier: Apache-2.0

"""Development only: stand-ins for what this machine lacks.

Not part of the ``gpu-nova-ext`` distribution (``setup.cfg`` lists only
``gpu_nova_ext``), so no production host installs it.  ``tools/run``
puts the work tree on its development venv's path (a ``.pth`` file).

``fakes``: a fake NVML library and a fake amdgpu/xe sysfs tree;
``libvirt_hosts``: a compute host as Nova's fakelibvirt and libvirt's
test driver see it; ``cloud``: the development cloud of real OpenStack
processes (``tools/run cloud``).
"""
