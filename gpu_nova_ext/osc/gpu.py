# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu list`` / ``gpu show``: every GPU of the cloud, as
Placement holds it, with the health and driver the agents publish there
(or, with ``--state-wait`` and a transport_url, as the agents cast it).

One row per physical GPU (its providers joined, as ``openstack gpu audit``
joins them: :func:`gpu_nova_ext.operator.audit.build_report`); the servers
on it are the consumers of its GPU resources in Placement.
"""
from osc_lib.cli import format_columns

from gpu_nova_ext.cmd import common
from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import live_state
from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.osc import command

#: the columns of gpu list (and the keys of -f json), in order
COLUMNS = ('Host', 'Address', 'Model', 'Mode', 'Memory', 'Driver',
           'Capacity', 'Used', 'Reserved For', 'Health', 'State From',
           'Servers')
#: what --long adds, and what gpu show shows besides
LONG_COLUMNS = ('Vendor', 'Inventory Reserved', 'Traits', 'Providers',
                'Health Reasons')
_MEMORY_TRAIT = naming.TRAIT_PREFIX + 'MEMORY_'


def memory_of(traits) -> str | None:
    """``80GB`` from the agent's CUSTOM_GPU_MEMORY_80GB trait."""
    for trait in traits:
        if trait.startswith(_MEMORY_TRAIT):
            return trait[len(_MEMORY_TRAIT):]
    return None


def reserved_for(traits) -> list[str]:
    """The projects of the GPU's CUSTOM_GPU_RESERVED_<PROJECT> traits."""
    return sorted(p for p in map(naming.reservation_project, traits) if p)


def state_from(gpu: audit.GpuView, sources: dict[str, dict]) -> str | None:
    """``agent`` (live), ``placement, 5 min old`` or None (no state)."""
    if gpu.source is None:
        return None
    if gpu.source == live_state.AGENT:
        return 'agent'
    src = sources.get(gpu.host) or {}
    return 'placement, %s old%s' % (live_state.age(src.get('age_s') or 0),
                                    ', stale' if src.get('stale') else '')


def row(gpu: audit.GpuView, servers: list[str],
        sources: dict[str, dict] | None = None) -> dict:
    return {
        'Host': gpu.host, 'Address': gpu.address, 'Model': gpu.model,
        'Mode': gpu.mode, 'Memory': memory_of(gpu.traits),
        'Driver': gpu.driver, 'Capacity': gpu.total, 'Used': gpu.used,
        'Reserved For': format_columns.ListColumn(reserved_for(gpu.traits)),
        # None: no state (neither published in Placement nor heard)
        'Health': gpu.health,
        'State From': state_from(gpu, sources or {}),
        'Servers': format_columns.ListColumn(servers),
        'Vendor': gpu.vendor, 'Inventory Reserved': gpu.reserved,
        'Traits': format_columns.ListColumn(gpu.traits),
        'Providers': format_columns.ListColumn(gpu.providers),
        'Health Reasons': format_columns.ListColumn(gpu.reasons),
    }


def servers_on(placement, gpu: audit.GpuView) -> list[str]:
    return sorted({consumer for provider in gpu.providers
                   for consumer, _res in gpu_consumers.provider_consumers(
                       placement, provider)})


def add_state_args(parser) -> None:
    parser.add_argument(
        '--state-wait', type=float, default=0.0, metavar='<seconds>',
        help="Listen this long for the agents' GPU state (health, driver "
             "version) on the schedulers' transport_url of --config-file "
             "(0, the default: the state the agents publish in Placement, "
             "CUSTOM_GPU_HOST_* traits on each compute node; at most "
             '%d).' % live_state.MAX_STATE_WAIT)
    command.add_config_arg(parser)


def read_report(client, parsed_args) -> audit.AuditReport:
    """The audit of the cloud, with the agents' state.

    From Placement, or live where asked for (``live_state.gpu_states``).
    """
    wait = live_state.check_state_wait(parsed_args.state_wait)
    conf = client.load_conf(parsed_args.config_file)
    providers = audit.collect(client.placement)
    if wait:
        # native threads for oslo.messaging, as gpu-nova-ext's own
        common.use_native_threads()
    return audit.build_report(
        providers, live_state.gpu_states(conf, wait, providers))


class ListGpu(command.Lister):
    """List the GPUs of the cloud, from Placement."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--host', metavar='<host>',
                            help='Only the GPUs of this compute host.')
        command.add_scope_args(parser, 'the GPUs')
        parser.add_argument('--unhealthy', action='store_true',
                            help='Only GPUs the agents report unhealthy.')
        parser.add_argument('--long', action='store_true',
                            help='Also the vendor, the reserved inventory, '
                                 'the traits, providers and health '
                                 'reasons.')
        add_state_args(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        hosts = (nova_actions.aggregate_hosts(client.conn,
                                              parsed_args.aggregate)
                 if parsed_args.aggregate else None)
        report = read_report(client, parsed_args)
        gpus = report.gpus
        if parsed_args.host:
            if not any(g.host == parsed_args.host for g in gpus):
                # the host may be in Placement without GPUs
                gpu_consumers.host_root(client.placement, parsed_args.host)
            gpus = [g for g in gpus if g.host == parsed_args.host]
        if parsed_args.model:
            models = sorted({g.model for g in gpus})
            gpus = [g for g in gpus
                    if naming.model_matches(parsed_args.model, g.model)]
            if not gpus:
                raise exception.InvalidArgument(
                    argument='--model', value=parsed_args.model,
                    reason='no GPU of that model%s; models in Placement: '
                           '%s' % (' on ' + parsed_args.host
                                   if parsed_args.host else '',
                                   ', '.join(models) or 'none'))
        if hosts is not None:
            gpus = [g for g in gpus if g.host in hosts]
        if parsed_args.unhealthy:
            gpus = [g for g in gpus if g.health == 'unhealthy']
        columns = COLUMNS + (LONG_COLUMNS if parsed_args.long else ())
        rows = [row(g, servers_on(client.placement, g),
                    report.state_sources) for g in gpus]
        return columns, [tuple(r[c] for c in columns) for r in rows]


class ShowGpu(command.ShowOne):
    """Show one GPU: its capacity, traits, providers and servers."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('host', metavar='<host>',
                            help='Compute host of the GPU.')
        parser.add_argument('address', metavar='<address>',
                            help='PCI address of the GPU (0000:84:00.0).')
        add_state_args(parser)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        try:
            address = naming.normalize_pci_address(parsed_args.address)
        except ValueError as exc:
            raise exception.InvalidArgument(
                argument='<address>', value=parsed_args.address,
                reason=str(exc))
        report = read_report(client, parsed_args)
        gpus = report.gpus
        on_host = [g for g in gpus if g.host == parsed_args.host]
        if not on_host:
            gpu_consumers.host_root(client.placement, parsed_args.host)
        found = [g for g in on_host if g.address == address]
        if not found:
            raise exception.InvalidArgument(
                argument='GPU', value='%s %s' % (parsed_args.host,
                                                 parsed_args.address),
                reason='no such GPU in Placement; GPUs of %s: %s (openstack '
                       'gpu list --host %s)' % (
                           parsed_args.host, ', '.join(
                               g.address or '?' for g in on_host) or 'none',
                           parsed_args.host))
        data = row(found[0], servers_on(client.placement, found[0]),
                   report.state_sources)
        columns = COLUMNS + LONG_COLUMNS
        return columns, tuple(data[c] for c in columns)
