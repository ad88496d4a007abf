# SPDX-License-Identifier: Apache-2.0

"""Each placement checked against its flavor's ``gpu:`` request.

After the fact and whatever the policy: a policy without our filters
(``--compare nova``) cannot read ``gpu:`` keys, and Nova places a
``gpu:model: L40S`` server on any provider of the class it asked for.
Such a server is **misplaced**: it is counted apart from placed servers
and named in the output.

The rule is the project's own, not a copy: the flavor's extra specs are
parsed by :func:`gpu_nova_ext.scheduler.request.parse_extra_specs` (as
the filters parse them) and each GPU the server got is judged on its
agent facts (:func:`gpu_nova_ext.state.records.gpu_facts`) by the model,
memory, capability and power-profile filters' own
``constraint``/``fact_passes``.  What a GPU *is* (and the power profile
its host is configured with) decides; its health and reservations are
state of the moment and are reported elsewhere (events, the reservations
table).
"""
from gpu_nova_ext.scheduler.filters import facts
from gpu_nova_ext.scheduler import request as gpu_request
from gpu_nova_ext.state import records

#: the filters whose rule says what a GPU must be for a request
RULES = (facts.GpuModelFilter, facts.GpuMemoryFilter,
         facts.GpuCapabilityFilter, facts.GpuPowerProfileFilter)

#: misplaced servers named in the WARNING
NAMED = 5


def _fact(rule, gpu):
    if isinstance(rule, facts.GpuPowerProfileFilter):
        # its fact is read per GPU, not from a family (see the filter)
        return gpu.source.get('power_profile')
    return gpu.fact(rule.FAMILY)


class Checker:
    """Judges placements of one run; one instance per Simulation.

    Needs the scheduler's state cache of the run (the filters attach to
    it as in nova-scheduler).
    """

    def __init__(self):
        self.rules = [cls() for cls in RULES]
        self._requests: dict[str, gpu_request.GpuRequest] = {}

    def _request(self, flavor) -> gpu_request.GpuRequest:
        req = self._requests.get(flavor.name)
        if req is None:
            req = self._requests[flavor.name] = (
                gpu_request.parse_extra_specs(flavor.extra_specs))
        return req

    def check(self, flavor, payload: dict | None, gpus: list[str]
              ) -> str | None:
        """Why ``gpus`` (PCI addresses) do not satisfy the flavor; or None.

        :param payload: the host's GPU state as its agent reported it.
        """
        req = self._request(flavor)
        wanted = [(rule, rule.constraint(req)) for rule in self.rules]
        wanted = [(rule, c) for rule, c in wanted if c is not None]
        if not wanted:
            return None
        if not gpus:
            return 'no GPU, but the flavor asks for %s' % '; '.join(
                rule.describe(c) for rule, c in wanted)
        facts = {g['pci_address']: records.gpu_facts(i, g) for i, g in
                 enumerate((payload or {}).get('gpus', []))}
        for address in gpus:
            gpu = facts.get(address)
            if gpu is None:
                return 'GPU %s unknown to its host\'s agent' % address
            for rule, constraint in wanted:
                if not rule.fact_passes(_fact(rule, gpu), constraint):
                    return '%s %s (%s) does not meet %s' % (
                        address, gpu.model or 'unknown model',
                        gpu.mode or '-', rule.describe(constraint))
        return None


def warning(policy: str | None, servers: list) -> str | None:
    """The WARNING line naming the first misplaced servers, or None."""
    bad = [s for s in servers if s.misplaced]
    if not bad:
        return None
    named = '; '.join('%s (%s) on %s: %s' % (s.server, s.flavor, s.host,
                                             s.misplaced)
                      for s in bad[:NAMED])
    return ('WARNING: %s%d server(s) on a GPU their flavor\'s gpu: extra '
            'specs do not allow (misplaced, not counted as placed): %s%s'
            % ('policy %s: ' % policy if policy else '', len(bad), named,
               '; ...' if len(bad) > NAMED else ''))
