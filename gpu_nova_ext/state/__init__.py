# SPDX-License-Identifier: Apache-2.0

"""The GPU state channel (design doc: State protocol).

``schema`` the wire format, ``rpc`` the schedulers' RPC server,
``records`` what the plugins read, ``cache`` the newest live state per
host.  Nothing here imports the agent, the inventory, pynvml or libvirt.
"""
