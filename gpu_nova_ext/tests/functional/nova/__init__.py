"""End-to-end tests in Nova's own functional harness.

Servers are booted through Nova's real API, conductor, scheduler and
Placement (libvirt driver on Nova's fakelibvirt), with gpu_nova_ext's
filters and weighers enabled through nova.conf and our agent writing to
that Placement and casting its state through the harness's transport.

Importing ``nova.tests`` applies Nova's eventlet monkey patching to the
whole test process (Nova's harness runs that way by default).
"""
