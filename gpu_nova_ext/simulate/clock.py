# SPDX-License-Identifier: Apache-2.0

"""The simulation's own clock."""
import time


class SimClock:
    """The simulation's own time: seconds since its start.

    ``wall()`` is what the agents stamp their payloads with and what the
    state cache compares them against; ``monotonic()`` is the state
    cache's TTL clock and the agents' health judges' clock.
    """

    def __init__(self, start: float | None = None):
        self.start = time.time() if start is None else start
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def wall(self) -> float:
        return self.start + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
