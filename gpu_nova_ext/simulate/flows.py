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

"""Health changes and remediation's moves within a run.

Part of :class:`gpu_nova_ext.simulate.runner.Simulation`: the agents'
health judges on the simulated clock (:mod:`.agent_health`), the agent's
``gpu.health.update`` handed to remediation (:mod:`.remediation`), and a
moved server's hosts as nova-compute leaves them.
"""
from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.simulate import remediation
from gpu_nova_ext.simulate import result as res
from gpu_nova_ext.simulate import steps as st


class HealthFlow:
    """The events, health and remediation steps of a Simulation."""

    def _event(self, result, cache, step: st.Event) -> None:
        host = self.hosts[step.host]
        if step.agent is not None:
            host.agent_up = step.agent == 'up'
            if host.agent_up:
                # a restarted agent: its message sequence starts afresh
                host.publisher = agent_payload.Publisher()
                host.cycle(self.clock.wall())
                self._cast(cache, host)
            what = 'agent %s' % step.agent
        else:
            old = self._health_of(host, step.gpu)
            host.apply_event(step)
            verdicts = []
            if step.xids:
                host.health.xid(step.gpu, step.xids)
            if step.metrics or step.xids:
                host.health.dirty = True
                self._judging.add(host.name)
                if host.agent_up:
                    verdicts = host.health.sample(self.clock.now)
            host.cycle(self.clock.wall())
            if host.agent_up:
                self._cast(cache, host)
            what = ', '.join(
                (['health -> %s' % step.health] if step.health else []) +
                ['%s -> %s' % kv for kv in step.metrics.items()] +
                ['XID %d' % x for x in step.xids])
        result.events.append(res.EventResult(
            host=step.host, gpu=step.gpu, health=step.health,
            metrics=dict(step.metrics), step=step.index, what=what))
        self.progress('event: %s %s%s' % (
            step.host, step.gpu + ' ' if step.gpu else '', what))
        if step.agent is None and host.agent_up:
            if step.health and step.health != old[0]:
                self._health_changed(host, step.gpu, old, (
                    step.health, step.reasons))
            self._verdicts(result, host, verdicts)

    @staticmethod
    def _health_of(host, gpu: str) -> tuple[str, list[str]]:
        """What the host's agent last reported for ``gpu``."""
        for entry in (host.payload or {}).get('gpus', []):
            if entry.get('pci_address') == gpu:
                health = entry.get('health') or {}
                return (health.get('state', 'healthy'),
                        list(health.get('reasons') or []))
        return 'healthy', []

    def _judge(self, result, cache, host) -> None:
        """A sample of the host's GPUs; changed verdicts are cast at once."""
        verdicts = host.health.sample(self.clock.now)
        if not host.health.active():
            self._judging.discard(host.name)
        if verdicts:
            host.cycle(self.clock.wall())
            self._cast(cache, host)
            self._verdicts(result, host, verdicts)

    def _verdicts(self, result, host, verdicts) -> None:
        for v in verdicts:
            what = 'health -> %s (agent: %s)' % (
                v.state, '; '.join(v.reasons) or 'no cause left')
            result.events.append(res.EventResult(
                host=host.name, gpu=v.key, health=v.state, metrics={},
                step=self._index, what=what))
            self.progress('agent %s: GPU %s %s' % (host.name, v.key, what))
            self._health_changed(host, v.key, (v.old_state, v.old_reasons),
                                 (v.state, v.reasons))

    def _health_changed(self, host, gpu: str, old, new) -> None:
        """The agent's ``gpu.health.update``, to remediation if on."""
        if self.remediation is not None:
            self.remediation.health_changed(remediation.health_payload(
                host.name, gpu, host.facts.get(gpu, {}), old[0], new[0],
                old[1], new[1]))

    def server_names(self) -> dict[str, str]:
        """Instance UUID -> server name of the servers that exist."""
        return {uuid: name for name, (_, uuid) in self._servers.items()}

    def relocated(self, name: str, instance_uuid: str, src, dest,
                  allocations: dict) -> list[str]:
        """A server moved: both hosts as nova-compute leaves them.

        Returns the server's GPUs on ``dest``.
        """
        flavor = src.instances[instance_uuid].flavor
        self.meter.consumed(src, instance_uuid, -1)
        src.release(instance_uuid)
        gpus = dest.consume(flavor, allocations, instance_uuid)
        self.meter.consumed(dest, instance_uuid, +1)
        self._servers[name] = (dest.name, instance_uuid)
        for host in (src, dest):
            host.cycle(self.clock.wall())
            if host.agent_up:
                self._cast(self._cache, host)
        return gpus
