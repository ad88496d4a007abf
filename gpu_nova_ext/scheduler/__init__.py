"""nova-scheduler plugins: GPU filters and weighers.

See the design doc (doc/source/contributor): Scheduler plugins.

``request`` parses a request's GPU needs once, ``base`` holds what every
filter and weigher shares (per-request context, candidate pruning, missing
state policy, multipliers), ``filters`` and ``weighers`` one module each.
"""
