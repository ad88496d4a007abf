# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu flavor create|list|show|delete``: Nova flavors that ask
for GPUs, with the right extra specs (:mod:`gpu_nova_ext.operator.flavor`).

A GPU flavor is one with a ``gpu:`` key, a GPU resource class
(``resources:VGPU``, ``resources:CUSTOM_GPU_*``, ...) or a
``pci_passthrough:alias``.
"""
from openstack import exceptions as os_exc
from osc_lib.cli import format_columns

from gpu_nova_ext import exception
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.operator import gpu_consumers
from gpu_nova_ext.operator import quota
from gpu_nova_ext.osc import command
from gpu_nova_ext.scheduler import request

#: the first compute microversion at which nova-api validates extra specs
EXTRA_SPECS_MICROVERSION = '2.86'
#: Placement's GET /resource_classes
PLACEMENT_MICROVERSION = '1.2'
#: the fields of flavor show / create (and the keys of -f json)
SHOW_COLUMNS = ('id', 'name', 'vcpus', 'ram', 'disk', 'is_public',
                'description', 'gpu_specs', 'extra_specs', 'quota_class')
LIST_COLUMNS = ('ID', 'Name', 'VCPUs', 'RAM', 'Disk', 'Is Public',
                'GPU Specs')


#: flavor create's defaults of gpu: keys
_DEFAULTS = {'gpu:model': {'required': True},
             'gpu:mode': {'default': 'vgpu'}}
#: what flavor create's help adds to a gpu: key's own
_MORE_HELP = {
    'gpu:model': '. One model: the normalized model (A100_80GB_PCIE) or a '
                 'prefix at a _ (A100), which flavor create resolves when '
                 'exactly one model of the kind is offered in Placement '
                 '(not with --dry-run).',
    'gpu:mode': '; default vgpu.',
    'gpu:vgpu_type': '; required with --vgpu-backend vfio.',
}


def _help(key: request.Key) -> str:
    """A gpu: key's option help: the key's own, and its rule."""
    text = '%s (%s)%s' % (key.help, key.name,
                          _MORE_HELP.get(key.name, '.'))
    if not key.values and key.name != 'gpu:model':  # one model here
        text += ' Value: %s.' % key.allowed
    return text.replace('%', '%%')  # argparse formats help with %


def request_from_args(args) -> flavor.GpuFlavorRequest:
    """The flavor request of ``openstack gpu flavor create``'s options."""
    gpu = {flavor.attribute(key): getattr(args, flavor.attribute(key))
           for key in request.KEYS.values()}
    return flavor.GpuFlavorRequest(
        count=args.count, vgpu_backend=args.vgpu_backend, mig=args.mig,
        exact_model=args.exact_model, alias=args.alias,
        pci_accounting=args.pci_accounting, vgpu_class=args.vgpu_class,
        **gpu)


def plan_from_args(args, req: flavor.GpuFlavorRequest | None = None
                   ) -> flavor.FlavorPlan:
    """The flavor to create (``req``: the options' request, resolved)."""
    req = req or request_from_args(args)
    for what in ('vcpus', 'ram', 'disk'):
        if getattr(args, what) < (0 if what == 'disk' else 1):
            raise exception.InvalidArgument(
                argument='--' + what, value=getattr(args, what),
                reason='give a positive number')
    return flavor.FlavorPlan(
        name=args.name, vcpus=args.vcpus, ram=args.ram, disk=args.disk,
        is_public=not args.private, extra_specs=flavor.extra_specs(req),
        description=args.description, quota_class=flavor.quota_class(req))


def resource_classes(placement) -> list[str]:
    """The names of Placement's resource classes."""
    body = placement.get('/resource_classes',
                         version=PLACEMENT_MICROVERSION)
    return [c['name'] for c in body['resource_classes']]


def check_resource_class(names: list[str],
                         plan: flavor.FlavorPlan) -> None:
    """Refuse a flavor asking a custom class no host offers (never lands).

    ``--model A10`` with the per-model vGPU class asks
    ``CUSTOM_VGPU_A10``, while no host offers it; ``names``: Placement's
    resource classes.
    """
    rc = plan.quota_class
    if not (rc or '').startswith('CUSTOM_') or (
            'resources:%s' % rc not in plan.extra_specs) or rc in names:
        return
    known = sorted(c.label for c in quota.gpu_classes(names))
    raise exception.InvalidArgument(
        argument='--model', value=plan.extra_specs.get('gpu:model', ''),
        reason='no host offers resource class %s, so flavor %r would land '
               'nowhere. GPU classes in Placement: %s. Give the full model '
               '(openstack gpu list), configure the hosts first '
               '(gpu-nova-ext nova-conf), or use --vgpu-class vgpu for hosts '
               "that keep Nova's VGPU" % (rc, plan.name,
                                          ', '.join(known) or 'none'))


def check_name(conn, name: str) -> None:
    """Refuse the name of an existing flavor."""
    if conn.compute.find_flavor(name, ignore_missing=True):
        raise exception.InvalidArgument(
            argument='NAME', value=name,
            reason='a flavor of that name exists already: choose another '
                   'or delete it first (openstack gpu flavor delete %s)'
                   % name)


def create(conn, placement, args) -> tuple[flavor.FlavorPlan, object]:
    """Create the flavor of ``args`` and set its extra specs.

    The model is resolved against Placement's classes first
    (:func:`gpu_nova_ext.operator.flavor.resolve_model`); the flavor is
    removed again when Nova refuses its extra specs.  (plan, flavor).
    """
    req = request_from_args(args)
    plan_from_args(args, req)  # every check of the options, before I/O
    check_name(conn, args.name)
    names = resource_classes(placement)
    plan = plan_from_args(args, flavor.resolve_model(req, names))
    check_resource_class(names, plan)
    try:
        fields = dict(name=plan.name, vcpus=plan.vcpus, ram=plan.ram,
                      disk=plan.disk, is_public=plan.is_public)
        if plan.description:
            fields['description'] = plan.description
        made = conn.compute.create_flavor(**fields)
    except os_exc.SDKException as exc:
        raise exception.GpuNovaExtException(
            'Nova refused flavor %r: %s' % (plan.name, exc))
    try:
        # 2.86: nova-api validates every key (ours through the gpu:
        # validators), so a typo fails here and not at boot time
        resp = conn.compute.post(
            '/flavors/%s/os-extra_specs' % made.id,
            json={'extra_specs': plan.extra_specs},
            microversion=EXTRA_SPECS_MICROVERSION)
        os_exc.raise_from_response(resp)
    except os_exc.SDKException as exc:
        conn.compute.delete_flavor(made, ignore_missing=True)
        raise exception.GpuNovaExtException(
            'Nova refused the extra specs of flavor %r (the flavor was '
            'removed again): %s. Check the gpu: validators are installed on '
            'nova-api and the [pci] alias exists there.' % (plan.name, exc))
    return plan, made


def find_gpu_flavor(conn, name_or_id: str):
    """The GPU flavor ``name_or_id``; a typed error for any other."""
    found = conn.compute.find_flavor(name_or_id, ignore_missing=True,
                                     get_extra_specs=True)
    if found is None:
        raise exception.InvalidArgument(
            argument='flavor', value=name_or_id,
            reason='no such flavor in Nova; openstack gpu flavor list shows '
                   'the GPU flavors')
    if not flavor.gpu_extra_specs(found.extra_specs):
        raise exception.InvalidArgument(
            argument='flavor', value=name_or_id,
            reason='not a GPU flavor (no gpu:, GPU resources or PCI alias '
                   'key); use openstack flavor show|delete for it')
    return found


def show(found, quota_class=None) -> tuple:
    specs = found.extra_specs or {}
    data = {'id': found.id, 'name': found.name, 'vcpus': found.vcpus,
            'ram': found.ram, 'disk': found.disk,
            'is_public': found.is_public, 'description': found.description,
            'gpu_specs': format_columns.DictColumn(
                flavor.gpu_extra_specs(specs)),
            'extra_specs': format_columns.DictColumn(specs),
            'quota_class': quota_class or _quota_class(specs)}
    return SHOW_COLUMNS, tuple(data[c] for c in SHOW_COLUMNS)


def _quota_class(specs: dict) -> str | None:
    for key in specs:
        if key.startswith('resources') and gpu_consumers.is_gpu_class(
                key.partition(':')[2]):
            return key.partition(':')[2]
    return None


class CreateGpuFlavor(command.ShowOne):
    """Create a Nova flavor that asks for GPUs.

    Nova's own keys (resources:CUSTOM_VGPU_<MODEL> or pci_passthrough:alias,
    trait:...=required) and gpu-nova-ext's gpu: keys, validated by nova-api
    (compute microversion 2.86).
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('name', metavar='<name>', help='Flavor name.')
        for key in request.KEYS.values():
            name = flavor.attribute(key)
            parser.add_argument(
                '--' + name.replace('_', '-'), dest=name,
                choices=key.choices or None,
                metavar=None if key.values else '<%s>' % name,
                help=_help(key),
                **_DEFAULTS.get(key.name, {}))
        parser.add_argument('--count', type=int, default=1, metavar='<n>',
                            help='GPUs (or vGPUs) per server (default 1).')
        parser.add_argument(
            '--vgpu-backend', choices=flavor.VGPU_BACKENDS, default='mdev',
            help='mdev (default; libvirt mediated devices, MIG-backed too) '
                 'or vfio (NVIDIA vendor-specific VFIO vGPU on SR-IOV '
                 'VFs).')
        parser.add_argument(
            '--vgpu-class', choices=flavor.VGPU_CLASSES, default='model',
            help='mdev vGPU: ask resources:CUSTOM_VGPU_<MODEL> (default; '
                 'hosts configured by nova-conf) or resources:VGPU (hosts '
                 "that keep Nova's default class, any --model prefix).")
        parser.add_argument('--mig', action='store_true',
                            help='Require GPUs in MIG mode (MIG-backed '
                                 'vGPU).')
        parser.add_argument(
            '--exact-model', action='store_true',
            help='--model is the full model: also require the '
                 'CUSTOM_GPU_MODEL_<M> trait, so Placement prunes hosts.')
        parser.add_argument('--alias', metavar='<alias>',
                            help='[pci] alias to request (default: the one '
                                 'nova-conf generates for the model or '
                                 'type).')
        parser.add_argument(
            '--pci-accounting', choices=flavor.PCI_ACCOUNTING,
            default='placement',
            help="Passthrough: who counts the GPUs in Placement: Nova's PCI "
                 "in Placement (default) or the agent's inventory mode.")
        parser.add_argument('--vcpus', type=int, default=4,
                            metavar='<vcpus>', help='vCPUs (default 4).')
        parser.add_argument('--ram', type=int, default=16384,
                            metavar='<size-mb>',
                            help='RAM in MB (default 16384).')
        parser.add_argument('--disk', type=int, default=40,
                            metavar='<size-gb>',
                            help='Disk in GB (default 40).')
        parser.add_argument('--private', action='store_true',
                            help='Create a private flavor.')
        parser.add_argument('--description', metavar='<description>',
                            help='Flavor description.')
        parser.add_argument('--dry-run', action='store_true',
                            help='Show the flavor and its extra specs, and '
                                 'the openstack flavor create command that '
                                 'makes it; create nothing.')
        return parser

    def take_action(self, parsed_args):
        plan = plan_from_args(parsed_args)  # bad input: before any I/O
        if parsed_args.dry_run:
            data = {'id': None, 'name': plan.name, 'vcpus': plan.vcpus,
                    'ram': plan.ram, 'disk': plan.disk,
                    'is_public': plan.is_public,
                    'description': plan.description,
                    'gpu_specs': plan.extra_specs,
                    'extra_specs': plan.extra_specs,
                    'quota_class': plan.quota_class,
                    'openstack_cli': plan.openstack_cli()}
            return command.record(data)
        client = self.app.client_manager.gpu
        plan, made = create(client.conn, client.placement, parsed_args)
        made.extra_specs = plan.extra_specs
        return show(made, plan.quota_class)


class ListGpuFlavor(command.Lister):
    """List the GPU flavors (flavors with GPU extra specs)."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--all', action='store_true',
                            help='Private flavors too (admin).')
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.gpu.conn
        flavors = conn.compute.flavors(
            details=True, get_extra_specs=True,
            **({'is_public': None} if parsed_args.all else {}))
        rows = []
        for f in sorted(flavors, key=lambda f: f.name):
            specs = flavor.gpu_extra_specs(f.extra_specs)
            if specs:
                rows.append((f.id, f.name, f.vcpus, f.ram, f.disk,
                             f.is_public,
                             format_columns.DictColumn(specs)))
        return LIST_COLUMNS, rows


class _OneFlavor:
    """show and delete: one GPU flavor, by name or id."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('flavor', metavar='<flavor>',
                            help='Flavor name or id.')
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.gpu.conn
        return self.act(conn, find_gpu_flavor(conn, parsed_args.flavor))


class ShowGpuFlavor(_OneFlavor, command.ShowOne):
    """Show a GPU flavor, its GPU specs and quota class."""

    def act(self, conn, found):
        return show(found)


class DeleteGpuFlavor(_OneFlavor, command.Command):
    """Delete a GPU flavor (servers of it keep running)."""

    def act(self, conn, found):
        conn.compute.delete_flavor(found)
        self.say('deleted flavor %s (%s)' % (found.name, found.id))
