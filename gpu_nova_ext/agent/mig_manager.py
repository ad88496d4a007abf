# SPDX-License-Identifier: Apache-2.0

"""Keeps this host's GPUs in line with ``[mig] layouts``.

For each GPU of a model with a layout: is it in use (allocations on its
Placement providers, a libvirt domain holding the GPU, one of its VFs or
one of its mdevs, or nova.conf passing it through whole)?  Then nothing
changes and the plan says why.  Otherwise the plan's NVML steps run
(:mod:`mig_nvml`), and what was done, what waits for a GPU reset and
what failed is logged and kept in :attr:`MigManager.last` for the
``gpu-nova-ext mig plan`` command and the exporter.  The next discovery
then finds the MIG-backed vGPU types the driver offers on the new GPU
instances, and the reporter gives them to Placement as any vGPU type.
"""
import dataclasses
import time

from oslo_log import log as logging

from gpu_nova_ext.agent import attribution
from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext.agent import mig_nvml
from gpu_nova_ext.agent import override_scope
from gpu_nova_ext.inventory import mig_profiles
from gpu_nova_ext.inventory import nova_config
from gpu_nova_ext import naming

LOG = logging.getLogger(__name__)


#: a GPU's layout state, as the exporter reports it
STATES = ('in_line', 'changed', 'pending', 'blocked', 'failed', 'planned')


@dataclasses.dataclass
class GpuOutcome:
    plan: mig_layout.GpuPlan
    state: mig_nvml.MigState
    handle: object = None
    result: mig_nvml.ApplyResult | None = None

    @property
    def status(self) -> str:
        """One of STATES: where the GPU stands after this cycle."""
        plan, result = self.plan, self.result
        if result is not None:
            if result.failed:
                return 'failed'
            return 'pending' if result.pending else 'changed'
        if plan.layout is None and plan.blocked:
            return 'blocked'      # no layout could be chosen
        if plan.in_line:
            return 'in_line'
        if plan.pending:
            return 'pending'
        return 'blocked' if plan.blocked else 'planned'


def busy_reasons(gpu, usages, holders) -> list[str]:
    """Why ``gpu`` must not be laid out now (empty: it is free).

    :param usages: provider uuid -> {resource class: used}, or None when
        Placement could not be read.
    :param holders: ``attribution.Holders`` of the running domains, or
        None when libvirt could not be read.
    """
    reasons = []
    if gpu.mode == 'passthrough':
        reasons.append('offered to Nova as a whole GPU (passthrough)')
    if usages is None:
        reasons.append('Placement could not be read: allocations unknown')
    else:
        for uuid in gpu.provider_uuids:
            used = {rc: n for rc, n in (usages.get(uuid) or {}).items()
                    if n}
            if used:
                reasons.append('holds allocations in Placement (provider '
                               '%s: %s)' % (uuid, ', '.join(
                                   '%s=%d' % i for i in sorted(
                                       used.items()))))
    if holders is None:
        reasons.append('libvirt could not be read: servers unknown')
    else:
        addresses = {gpu.pci_address, *gpu.vfs}
        for address in sorted(addresses):
            try:
                key = naming.normalize_pci_address(address)
            except ValueError:
                key = address
            if key in holders.by_pci:
                reasons.append('server %s holds %s in libvirt' % (
                    holders.by_pci[key], address))
        for mdev in gpu.mdevs:
            domain = holders.by_mdev.get((mdev.uuid or '').lower())
            if domain:
                reasons.append('server %s holds mdev %s in libvirt' % (
                    domain, mdev.uuid))
    return reasons


def read_usages(client, inventory) -> dict | None:
    """provider uuid -> usages of every GPU provider; None on failure."""
    usages = {}
    try:
        for gpu in inventory.gpus:
            for uuid in gpu.provider_uuids:
                body = client.get('/resource_providers/%s/usages' % uuid)
                usages[uuid] = (body or {}).get('usages', {})
    except Exception as exc:  # noqa: any failure means unknown
        LOG.warning('MIG layouts: Placement usages unreadable (%s); no '
                    'GPU is laid out this cycle', exc)
        return None
    return usages


class MigManager:
    """Parses ``[mig]`` at start (a bad layout raises InvalidOption)."""

    def __init__(self, conf):
        self.layouts = mig_layout.parse_layouts(conf.mig.layouts)
        self.aggregate_layouts = mig_layout.parse_scoped_layouts(
            conf.mig.aggregate_layouts, 'aggregate_layouts', 'aggregate')
        hosts = mig_layout.parse_scoped_layouts(
            conf.mig.host_layouts, 'host_layouts', 'host')
        self.chooser = override_scope.Chooser(
            conf.host, self.layouts, self.aggregate_layouts,
            hosts.get(conf.host, {}))
        if self.chooser.active():
            specs = nova_config.load(conf).pci_device_specs
            for table in ([self.layouts, self.chooser.by_host] +
                          list(self.aggregate_layouts.values())):
                mig_layout.check_passthrough(table, specs)
        #: this host's Placement aggregates (None: not read yet)
        self.aggregates: frozenset | None = None
        self.apply_enabled = conf.mig.apply
        self.last: list[GpuOutcome] = []
        self._libvirt_uri = conf.agent.libvirt_uri
        self._attribution: attribution.Attribution | None = None

    @property
    def active(self) -> bool:
        return self.chooser.active()

    @property
    def needs_aggregates(self) -> bool:
        return bool(self.aggregate_layouts)

    def layout_for(self, model: str | None) -> override_scope.Choice:
        """The layout of ``model`` here: host > aggregate > model."""
        return self.chooser.choose(model or '', self.aggregates)

    def servers(self) -> attribution.Holders | None:
        """The running domains' devices; None when libvirt failed."""
        if self._attribution is None:
            self._attribution = attribution.Attribution(self._libvirt_uri)
        holders = self._attribution.refresh(time.monotonic())
        return None if self._attribution.failed else holders

    def cycle(self, inventory, client, apply: bool = True,
              root_uuid: str | None = None) -> bool:
        """Read Placement, libvirt and NVML, then plan (and apply).

        ``root_uuid``: the compute node provider, whose aggregates choose
        the ``aggregate_layouts`` (read when there are any).  Returns True
        when a GPU changed (the caller rediscovers).
        """
        import pynvml
        if self.needs_aggregates and root_uuid:
            self.aggregates = override_scope.read_aggregates(client,
                                                             root_uuid)
        usages = read_usages(client, inventory) if client else None
        holders = self.servers()
        pynvml.nvmlInit()
        try:
            if apply:
                return self.converge(inventory, pynvml, usages, holders)
            self.last = self.plan(inventory, pynvml, usages, holders)
            return False
        finally:
            pynvml.nvmlShutdown()

    def plan(self, inventory, nvml, usages, holders) -> list[GpuOutcome]:
        """One plan per GPU of a model with a layout (NVML read only)."""
        outcomes = []
        for gpu in inventory.gpus:
            choice = self.layout_for(gpu.model)
            layout = choice.value
            if layout is None and not choice.problem:
                continue
            busy = busy_reasons(gpu, usages, holders)
            board = (layout.board if layout is not None
                     else mig_profiles.board_for_model(gpu.model))
            try:
                handle = nvml.nvmlDeviceGetHandleByPciBusId(gpu.pci_address)
                state = mig_nvml.read_state(nvml, handle, board)
            except nvml.NVMLError as exc:
                handle, state = None, mig_nvml.MigState()
                busy.append('NVML cannot read it (error %s)' % getattr(
                    exc, 'value', exc))
            if state.current is None and handle is not None:
                busy.append('NVML reports no MIG on this GPU')
            if choice.problem:
                # no layout chosen: what the GPU holds now, and why
                outcomes.append(GpuOutcome(mig_layout.GpuPlan(
                    gpu.pci_address, gpu.model, None,
                    blocked=[choice.problem]), state, handle))
                continue
            plan = mig_layout.plan_gpu(
                gpu.pci_address, gpu.model, layout, state.current,
                state.pending, [(n, s) for n, s, _h in state.instances],
                busy=busy, source=choice.source)
            outcomes.append(GpuOutcome(plan, state, handle))
        return outcomes

    def converge(self, inventory, nvml, usages, holders) -> bool:
        """Plan and apply; returns True when a GPU changed."""
        outcomes = self.plan(inventory, nvml, usages, holders)
        changed = False
        for outcome in outcomes:
            plan = outcome.plan
            if plan.layout is None:
                LOG.warning('MIG layout of GPU %(gpu)s (%(model)s) not '
                            'chosen: %(why)s', {'gpu': plan.pci_address,
                                                'model': plan.model,
                                                'why': plan.blocked[0]})
                continue
            if plan.in_line:
                continue
            if plan.blocked and plan.steps:
                LOG.warning('MIG layout %(layout)s of GPU %(gpu)s not '
                            'applied: %(why)s (would %(steps)s)',
                            {'layout': plan.layout.describe(),
                             'gpu': plan.pci_address,
                             'why': '; '.join(plan.blocked),
                             'steps': ', '.join(plan.describe_steps())})
                continue
            for line in plan.pending:
                LOG.warning('MIG layout of GPU %(gpu)s pending: %(p)s',
                            {'gpu': plan.pci_address, 'p': line})
            if not plan.steps or not self.apply_enabled:
                if plan.steps:
                    LOG.info('MIG layout of GPU %(gpu)s would %(s)s '
                             '([mig] apply is off)',
                             {'gpu': plan.pci_address,
                              's': ', '.join(plan.describe_steps())})
                continue
            result = mig_nvml.apply_plan(nvml, outcome.handle,
                                         plan.layout.board, plan,
                                         outcome.state)
            outcome.result = result
            changed = changed or result.changed
            for line in result.done:
                LOG.info('MIG layout of GPU %(gpu)s: %(what)s',
                         {'gpu': plan.pci_address, 'what': line})
            for line in result.pending:
                LOG.warning('MIG layout of GPU %(gpu)s: %(what)s',
                            {'gpu': plan.pci_address, 'what': line})
            for line in result.failed:
                LOG.error('MIG layout of GPU %(gpu)s failed: %(what)s',
                          {'gpu': plan.pci_address, 'what': line})
        self.last = outcomes
        return changed
