# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
