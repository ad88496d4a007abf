"""nova-scheduler plugins: GPU filters and weighers.

See the design doc (doc/source/contributor): Scheduler plugins.

``request`` parses a request's GPU needs once, ``context`` holds what one
request's plugins share (nothing is kept on Nova's objects), ``filtering``
and ``weighing`` are the filter and weigher bases, ``filters`` and
``weighers`` one plugin per module.
"""
