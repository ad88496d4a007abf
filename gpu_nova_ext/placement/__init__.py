# SPDX-License-Identifier: Apache-2.0

"""Placement side of the agent: client, pure translation, reporter.

The embedded Placement and the nova-compute stand-in that the simulator
and the tests use live in :mod:`gpu_nova_ext.simulate`."""
