# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext simulate``: see where GPU servers land, and why.

A scenario (YAML, :mod:`gpu_nova_ext.simulate.scenario`) describes compute
hosts (a libvirt test-driver host XML plus simulated NVML facts per GPU),
flavors and a sequence of boots and events.  The runner
(:mod:`gpu_nova_ext.simulate.runner`) plays it against real parts: an
embedded openstack-placement, one real agent cycle per host, the GPU state
channel over oslo.messaging's ``fake://`` transport, and Nova's own request
spec, Placement query, HostState, filter and weight handler code, one
module per job: :mod:`.nova_config` (Nova's CONF), :mod:`.nova_flavors`,
:mod:`.nova_request` (RequestSpec and Placement query),
:mod:`.nova_host_states`, :mod:`.nova_claims` (report client, claim) and
:mod:`.nova_filter_handlers`.  :mod:`gpu_nova_ext.simulate.output` prints
the result as tables or JSON.
"""
