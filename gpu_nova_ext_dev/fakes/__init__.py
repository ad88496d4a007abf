# SPDX-License-Identifier: Apache-2.0

"""Stand-ins for what a compute host has and this machine lacks.

``nvml``: a fake ``pynvml`` that models real GPU profiles and NVML's
errors; ``sysfs``: a fake amdgpu/xe sysfs tree.  The tests, the
benchmarks (``tools/bench-sampler``, ``tools/bench-state``) and
``tools/device-check --fake`` drive the agent's real code with them.
They are a package of their own: no production module, and not the
simulator either, imports them.
"""
