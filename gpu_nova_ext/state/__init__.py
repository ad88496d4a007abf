# SPDX-License-Identifier: Apache-2.0

"""The GPU state channel (design doc: State protocol).

``schema`` defines the wire format (``schemas.json``, both sides),
``rpc`` runs the cache's RPC server for the life of the scheduler
(``StateListener``, over :mod:`gpu_nova_ext.messaging`), ``records`` is
what the plugins read, ``cache`` keeps the newest live state per host
inside each nova-scheduler process.  Nothing here imports the inventory
sources, pynvml or libvirt, nor the agent.
"""
