# SPDX-License-Identifier: Apache-2.0

"""The ``workload:`` generator: seeded arrivals from a flavor mix.

The sequence of flavors and lifetimes depends only on the seed, never on
where servers landed, so every policy of a ``--compare`` run sees the same
arrivals.
"""
import random

from gpu_nova_ext.simulate import steps as st


class Generator:
    """Yields ``(flavor name, lifetime or None)`` until told to stop."""

    def __init__(self, work: st.Workload, meter):
        self.work = work
        self.meter = meter
        self.rng = random.Random(work.seed)
        self.names = list(work.flavors)
        self.weights = [work.flavors[n] for n in self.names]
        self.arrived = 0
        self.reason = 'max_servers (%d) reached' % work.max_servers

    def __iter__(self):
        work = self.work
        while self.arrived < work.max_servers:
            flavor = self.rng.choices(self.names, self.weights)[0]
            lifetime = (self.rng.randint(*work.lifetime)
                        if work.lifetime else None)
            self.arrived += 1
            yield flavor, lifetime

    def done(self, server) -> bool:
        """Whether the stop condition holds after ``server``'s boot."""
        if self.work.until == st.UNTIL_FIRST_FAILURE:
            if (server.error and not server.quota
                    and self.meter.needs_gpu(server.flavor)):
                self.reason = 'first GPU failure (%s, %s)' % (
                    server.server, server.flavor)
                return True
            return False
        if self.meter.arrived_pct >= self.work.arrived_pct:
            self.reason = 'arrived load reached %.0f%%' % (
                self.work.arrived_pct)
            return True
        return False
