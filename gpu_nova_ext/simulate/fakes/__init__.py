"""Stand-ins for what a compute host has and this machine lacks.

``nvml``: a fake ``pynvml`` that models real GPU profiles and NVML's
errors; ``sysfs``: a fake amdgpu/xe sysfs tree.  The tests, the
benchmarks (``tools/bench-sampler``, ``tools/bench-state``) and
``tools/device-check --fake`` drive the agent's real code with them.
They live with the simulator, never beside production code, and the
production code never imports them.
"""
