# SPDX-License-Identifier: Apache-2.0

"""GpuTopologyFilter, and how well a server's GPUs are connected.

Design doc: Topology.  A candidate is as well connected as the few link
domains, PCIe switches and NUMA nodes its distinct GPUs span.
"""
import logging as std_logging

from gpu_nova_ext.scheduler import filtering
from gpu_nova_ext.scheduler import request

_SCOPES = {'nvlink': 'NVLink domain', 'switch': 'PCIe switch',
           'numa': 'NUMA node'}


def candidate_gpus(record, cand) -> list:
    """The distinct GpuFacts an allocation candidate draws from."""
    gpus = map(record.by_provider.get, cand['allocations'])
    return list({g.index: g for g in gpus if g is not None}.values())


def _span(gpus, field: str) -> int:
    """How many values of ``field`` the GPUs span (each unknown apart)."""
    values = [getattr(g, field) for g in gpus]
    known = {v for v in values if v is not None}
    return len(known) + values.count(None)


def connectedness(gpus) -> tuple[int, int, int]:
    """Link domains, PCIe switches and NUMA nodes spanned: fewer is better."""
    return (_span(gpus, 'link_domain'), _span(gpus, 'pci_switch'),
            _span(gpus, 'numa_node'))


def meets(gpus, topology: str) -> bool:
    """Whether the GPUs share the ``gpu:topology`` scope (one GPU does)."""
    if len(gpus) < 2:
        return True
    field = request.TOPOLOGY_FIELDS[topology]
    first = getattr(gpus[0], field)
    return first is not None and all(getattr(g, field) == first
                                     for g in gpus[1:])


def island(gpu):
    """What a server should not break needlessly.

    The GPU's link domain, else its PCIe switch (None: neither known).
    """
    return gpu.link_domain or gpu.pci_switch


class GpuTopologyFilter(filtering.GpuFilter):
    """Enforce gpu:topology nvlink, switch or numa on multi-GPU servers.

    Drops the candidates whose GPUs span more than one link domain, PCIe
    switch or NUMA node, and the hosts left without one.
    """

    def constraint(self, req):
        return req.topology if req.topology in _SCOPES else None

    def describe(self, constraint):
        return 'every GPU in one %s' % _SCOPES[constraint]

    def judge(self, host_state, record, ctx, constraint, name, memo):
        cands = host_state.allocation_candidates
        keep = [c for c in cands
                if meets(candidate_gpus(record, c), constraint)]
        if self.keep_candidates(host_state, keep, constraint, name):
            return True
        count = len(candidate_gpus(record, cands[0]))
        if _fits(record, constraint, count):
            ctx.cache.log_once(
                std_logging.WARNING, host_state.host, 'topology-cut',
                '%(filter)s: host %(host)s has %(n)d free GPUs in one '
                '%(scope)s, but none of the %(cands)d allocation candidates '
                "Placement returned for it uses them: raise Placement's "
                "max_allocation_candidates and Nova's max_placement_results "
                '(doc/source/topology.rst, "How many candidates a host '
                'needs").', filter=name, n=count, scope=_SCOPES[constraint],
                cands=len(cands))
        return False


def _fits(record, topology: str, count: int) -> bool:
    """Whether ``count`` free, healthy whole GPUs share the scope."""
    field = request.TOPOLOGY_FIELDS[topology]
    free: dict = {}
    for gpu in record.gpus:
        value = getattr(gpu, field)
        if (value is not None and record.free[gpu.index] >= 1.0
                and record.health_rank[gpu.index] == 0):
            free[value] = free.get(value, 0) + 1
    return count > 1 and max(free.values(), default=0) >= count
