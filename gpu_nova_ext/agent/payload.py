# SPDX-License-Identifier: Apache-2.0

"""The GPU state an agent casts to the schedulers.

See the design doc (doc/source/contributor): State protocol.

:func:`build_payload` gives a host's whole state: its identity and its
GPUs, each with its facts, health, use and metrics (the shape the
scheduler's ``GpuStateCache.get()`` gives back, and what ``report``, the
simulator and the tests read).  :class:`Publisher` turns it into the
protocol 1.1 messages every agent casts (:mod:`gpu_nova_ext.state.
schema`): a ``facts`` message when the facts changed (or a scheduler
asked), and a small ``metrics`` message every time, with only what
schedulers use.
"""
import hashlib
import json
import threading
import time
from typing import Any

from gpu_nova_ext.inventory import base
from gpu_nova_ext.state import schema

#: what a GPU's entry of a metrics message holds; the rest are its facts
_DYNAMIC = tuple(schema.SCHEMAS['definitions']['gpu_metrics']['properties'])


def build_payload(inventory: base.HostInventory, *, host: str,
                  nodename: str | None, root_provider_uuid: str | None,
                  mode: str, now: float | None = None) -> dict[str, Any]:
    """Build the JSON-serialisable state payload of one host.

    :param inventory: the host's GPUs, with provider UUIDs and, for a
        passthrough GPU, ``assigned`` (filled by the reporter: True/False
        whether its providers hold allocations, None when unknown), metrics
        and health (filled by the monitor).  A GPU object carries
        ``assigned`` only when it is known (never for the vGPU modes).
    :param host: ``[DEFAULT] host``.
    :param nodename: the compute node provider's name (hypervisor
        hostname); None while it is not known.
    :param root_provider_uuid: the compute node provider's UUID, or None.
    :param mode: ``[agent] mode``.
    :param now: the ``generated_at`` timestamp (default: now).
    """
    return {
        'host': host,
        'nodename': nodename,
        'generated_at': time.time() if now is None else float(now),
        'agent_mode': mode,
        'root_provider_uuid': root_provider_uuid,
        'gpus': [gpu.to_state() for gpu in inventory.gpus],
    }


_IDENTITY = ('nodename', 'root_provider_uuid', 'agent_mode')


def facts_of(gpu: dict) -> dict:
    """A GPU of :func:`build_payload` without its health, use, metrics."""
    return {k: v for k, v in gpu.items() if k not in _DYNAMIC}


def facts_digest(payload: dict) -> str:
    """Digest of a payload's facts.

    Its identity and GPUs without metrics, health and use.
    """
    facts = {k: payload.get(k) for k in _IDENTITY}
    facts['gpus'] = [facts_of(g) for g in payload['gpus']]
    text = json.dumps(facts, sort_keys=True, separators=(',', ':'))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _gpu_metrics(gpu: dict) -> dict:
    entry = {'health': gpu['health']}
    if gpu.get('assigned') is not None:
        entry['assigned'] = gpu['assigned']
    values = gpu.get('metrics')
    if values is not None:
        entry['metrics'] = {name: values[name]
                            for name in schema.SCHEDULER_METRICS
                            if values.get(name) is not None}
    return entry


class Publisher:
    """Protocol 1.1 messages of one agent process, numbered in order.

    The sequence number starts at 1 in each agent process; schedulers
    order a host's messages by it (not by the agent's clock), and a facts
    message starts a host's sequence afresh there.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seq = 0
        self._digest: str | None = None

    def messages(self, payload: dict, resend: bool = False) -> list[dict]:
        """What to cast for ``payload`` (:func:`build_payload`'s shape).

        :param resend: a scheduler asked for the facts.
        """
        digest = facts_digest(payload)
        common = {'version': schema.VERSION, 'host': payload['host'],
                  'generated_at': payload['generated_at'],
                  'digest': digest}
        out = []
        with self._lock:
            if resend or digest != self._digest:
                self._seq += 1
                facts = dict(common, kind=schema.FACTS, seq=self._seq,
                             gpus=[facts_of(g) for g in payload['gpus']])
                for key in _IDENTITY:
                    facts[key] = payload.get(key)
                out.append(facts)
                self._digest = digest
            self._seq += 1
            out.append(dict(common, kind=schema.METRICS, seq=self._seq,
                            gpus=[_gpu_metrics(g)
                                  for g in payload['gpus']]))
        return out

    def facts_sent(self) -> str | None:
        """Digest of the facts last sent."""
        return self._digest

    def forget(self) -> None:
        """Send the facts again with the next messages (a failed cast)."""
        with self._lock:
            self._digest = None
