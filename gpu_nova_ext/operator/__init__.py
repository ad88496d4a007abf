# SPDX-License-Identifier: Apache-2.0

"""Operator tooling: the nova.conf drop-in generator, GPU flavor extra
specs and the cluster audit.

The generators here are pure functions of their inputs (a
:class:`gpu_nova_ext.inventory.base.HostInventory`, flavor arguments,
Placement data already fetched); the ``gpu-nova-ext`` sub-commands in
:mod:`gpu_nova_ext.cmd` do the I/O around them.
"""
