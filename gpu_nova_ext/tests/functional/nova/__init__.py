# SPDX-License-Identifier: Apache-2.0

"""End-to-end tests in Nova's own functional harness.

Servers are booted through Nova's real API, conductor, scheduler and
Placement (libvirt driver on Nova's fakelibvirt), with gpu_nova_ext's
filters and weighers enabled through nova.conf and our agent writing to
that Placement and casting its state through the harness's transport.

Nova runs here in its native threading mode (``gpu_nova_ext/tests``
sets that up before anything imports Nova): no eventlet monkey patching
of the test process.
"""
