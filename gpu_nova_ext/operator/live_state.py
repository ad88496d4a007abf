# SPDX-License-Identifier: Apache-2.0

"""The agents' GPU state (health, driver version): as the schedulers hear
it on their transport_url, listened to for a while, or as the agents
publish it in Placement on each compute node provider.

What ``openstack gpu list|show|audit``, ``openstack gpu host undrain``,
``openstack gpu rollout run`` and ``gpu-nova-ext remediate`` read besides
Placement's inventories.  :func:`gpu_states` picks the source: the live
state where a ``--state-wait`` and a ``transport_url`` are given, else the
agents' ``CUSTOM_GPU_HOST_*`` traits, so a clouds.yaml alone is enough
(design doc: Placement ownership).  A state read from Placement is shaped
as the live payload (design doc: State protocol) with ``source``
``placement``, ``reported_at``, ``age_s``, ``stale`` and
``driver_branches`` added.
"""
import datetime
import math
import time

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import exception
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)

#: the longest --state-wait: agents cast every report_interval (60 s by
#: default), so a few minutes hear every live agent
MAX_STATE_WAIT = 3600.0
AGENT = 'agent'
PLACEMENT = 'placement'
#: a reported stamp older than this is stale: the agent renews it at
#: least every HOST_REPORTED_REFRESH while it runs
STALE_AFTER = 2 * naming.HOST_REPORTED_REFRESH


def live_states(conf: cfg.ConfigOpts, wait: float) -> dict[str, dict]:
    """GPU state payloads by host, heard within ``wait`` seconds.

    Best effort: an unreachable message bus gives an empty answer and a
    warning.
    """
    from gpu_nova_ext.state import cache as state_cache

    cache = state_cache.get_cache()
    try:
        cache.start(conf)
    except Exception as exc:
        LOG.warning('No live GPU state (%s); auditing from Placement only.',
                    exc)
        return {}
    try:
        time.sleep(wait)
        return {host: cache.get(host) for host in cache.hosts()
                if cache.get(host)}
    finally:
        cache.stop()


def check_state_wait(value: float) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_STATE_WAIT):
        raise exception.InvalidArgument(
            argument='--state-wait', value=value,
            reason='give the seconds to listen for the agents, from 0 to '
                   '%d' % MAX_STATE_WAIT)
    return value


def state_wait(conf: cfg.ConfigOpts, value: float | None) -> float:
    """``--state-wait``, checked, or ``[remediation] state_wait`` (None)."""
    if value is None:
        return conf.remediation.state_wait
    return check_state_wait(value)


def bus_url(conf: cfg.ConfigOpts) -> str | None:
    """``[DEFAULT] transport_url`` as configured; None when not set.

    oslo.messaging's default (``rabbit://``, a broker on this machine) is
    not a configuration: an admin workstation has none.
    """
    import oslo_messaging

    try:
        # registers transport_url on conf
        oslo_messaging.TransportURL.parse(conf)
    except Exception as exc:
        LOG.debug('transport_url not usable: %s', exc)
    try:
        where = conf.get_location('transport_url')
        value = conf.transport_url
    except cfg.NoSuchOptError:
        return None
    if where is None or where.location == cfg.Locations.opt_default:
        return None
    return value or None


def gpu_states(conf: cfg.ConfigOpts, wait: float, providers: list,
               now: datetime.datetime | None = None) -> dict[str, dict]:
    """GPU state payloads by host, from one source.

    The live state when ``wait`` > 0 and ``conf`` has a transport_url
    (what the operator asked for: a host not heard has no state, as
    before); otherwise the state each agent published on its compute node
    provider (:func:`placement_states`), what a clouds.yaml reaches.

    :param providers: what :func:`~gpu_nova_ext.operator.audit.collect`
        read (the roots' traits included).
    """
    if is_live(conf, wait):
        return live_states(conf, wait)
    return placement_states(providers, now)


def is_live(conf: cfg.ConfigOpts, wait: float) -> bool:
    """Whether :func:`gpu_states` listens to the agents (else Placement)."""
    return bool(wait and bus_url(conf))


def placement_states(providers: list, now: datetime.datetime | None = None
                     ) -> dict[str, dict]:
    """The state each agent published in Placement, by host.  No I/O.

    Only hosts whose root carries a ``CUSTOM_GPU_HOST_REPORTED_*`` stamp.
    The GPUs are those of :func:`~gpu_nova_ext.operator.audit.build_report`
    without state (a passthrough provider alone, others joined per PCI
    bus); a GPU's health is the worst health trait of its address (of an
    address on its bus, for a vGPU), the address named in the reasons.  A
    GPU's driver is the host's branch when all its GPUs run one; with
    several branches it is None and ``driver_branches`` names them.
    """
    from gpu_nova_ext.operator import audit

    now = now or datetime.datetime.now(datetime.timezone.utc)
    report = audit.build_report(providers, {})
    gpus_of: dict[str, list] = {}
    for g in report.gpus:
        gpus_of.setdefault(g.host, []).append(g)
    out = {}
    for p in providers:
        if p.parent_uuid is not None:
            continue
        stamps = sorted(filter(None, map(naming.host_reported_at,
                                         p.traits)))
        if not stamps:
            continue
        branches = sorted(filter(None, map(naming.host_driver_branch,
                                           p.traits)))
        health = [h for h in map(naming.gpu_health, p.traits) if h]
        age = (now - stamps[-1]).total_seconds()
        sole = branches[0] if len(branches) == 1 and (
            branches[0] != _UNKNOWN) else None
        out[p.name] = {
            'host': p.name, 'source': PLACEMENT,
            'root_provider_uuid': p.uuid,
            'reported_at': stamps[-1].isoformat(),
            'age_s': max(age, 0.0),
            'stale': age > STALE_AFTER.total_seconds(),
            'driver_branches': branches,
            'gpus': [{'pci_address': g.address,
                      'provider_uuids': list(g.providers),
                      'driver_version': sole,
                      'health': _health(g, health)}
                     for g in gpus_of.get(p.name, [])],
        }
    return out


_UNKNOWN = naming.host_driver_branch(naming.HOST_DRIVER_UNKNOWN)
_RANK = {'healthy': 0, 'degraded': 1, 'unhealthy': 2}


def _health(gpu, traits: list[tuple[str, str]]) -> dict:
    """The health payload of one GPU from the root's health traits.

    A passthrough GPU's traits name its own address; a vGPU's may name
    its physical function while its providers are VFs on the same bus.
    """
    bus = (gpu.address or '').rsplit(':', 1)[0]
    mine = sorted((s, a) for s, a in traits
                  if a == gpu.address or (
                      gpu.mode != naming.MODE_PASSTHROUGH
                      and a.rsplit(':', 1)[0] == bus))
    state = max((s for s, _a in mine), key=_RANK.get, default='healthy')
    return {'state': state,
            'reasons': ['GPU %s %s (Placement)' % (a, s) for s, a in mine]}


def source_of(state: dict | None) -> str | None:
    """``agent``, ``placement`` or None (no state)."""
    if state is None:
        return None
    return state.get('source', AGENT)


def describe(state: dict | None) -> str:
    """Where ``state`` came from and how old it is, for an output line."""
    if state is None:
        return 'no GPU state'
    if source_of(state) == AGENT:
        return 'agent state'
    return ("gpu-nova-agent's traits in Placement, as of %s (%s old%s)" % (
        state['reported_at'].replace('+00:00', 'Z'), age(state['age_s']),
        ', stale' if state['stale'] else ''))


def age(seconds: float) -> str:
    """``42 s``, ``5 min``, ``3 h``."""
    if seconds < 120:
        return '%d s' % seconds
    if seconds < 7200:
        return '%d min' % (seconds // 60)
    return '%d h' % (seconds // 3600)
