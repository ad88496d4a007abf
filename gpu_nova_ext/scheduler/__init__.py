# SPDX-License-Identifier: Apache-2.0

"""nova-scheduler plugins: GPU filters and weighers.

Design doc: Scheduler plugins.  ``request`` parses a request's GPU needs,
``context`` holds what its plugins share, ``filtering`` and ``weighing``
are the bases of ``filters`` and ``weighers``.
"""
