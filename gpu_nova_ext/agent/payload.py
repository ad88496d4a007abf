"""The GPU state payload an agent casts to the schedulers.

See the design doc (doc/source/contributor): State protocol.
"""
import time
from typing import Any

from gpu_nova_ext.inventory import base

VERSION = '1.0'


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
        'version': VERSION,
        'host': host,
        'nodename': nodename,
        'generated_at': time.time() if now is None else float(now),
        'agent_mode': mode,
        'root_provider_uuid': root_provider_uuid,
        'gpus': [gpu.to_state() for gpu in inventory.gpus],
    }
