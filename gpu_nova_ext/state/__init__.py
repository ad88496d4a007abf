"""The GPU state channel: payload schema, RPC API and the scheduler cache.

``payload`` validates what an agent casts, ``rpc`` carries it, ``cache``
keeps the newest live payload per host inside each nova-scheduler process
and precomputes what the GPU filters and weighers look up per request.
Nothing here imports the agent, the inventory sources, pynvml or libvirt.
"""
