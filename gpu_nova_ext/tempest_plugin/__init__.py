# SPDX-License-Identifier: Apache-2.0


"""The GPU tests an operator runs with Tempest after a deploy.

Tempest loads :class:`.plugin.GpuNovaExtTempestPlugin` by the
``tempest.test_plugins`` entry point; the tests are in ``tests/``, the
options (``[gpu_nova_ext]`` of tempest.conf) in :mod:`.config`, and what
the tests decide without a cloud (which flavors are GPU flavors, which
allocations are GPUs) in :mod:`.gpus`.  doc/source/tempest.rst.
"""
