"""The GPU state channel (design doc: State protocol).

``schema`` defines the wire format (agent and scheduler), ``rpc`` carries
it over ``transport``, ``records`` is what the plugins read, ``cache``
keeps the newest live state per host inside each nova-scheduler process
and ``listener`` runs the cache's RPC server for the life of the
scheduler.  Nothing here imports the agent, the inventory sources, pynvml
or libvirt.
"""
