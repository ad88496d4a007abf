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

"""``gpu-nova-ext flavor create``: a GPU flavor through openstacksdk."""
import argparse
import os
import sys

from oslo_config import cfg

from gpu_nova_ext import exception
from gpu_nova_ext.operator import flavor

#: the first compute microversion at which nova-api validates extra specs
EXTRA_SPECS_MICROVERSION = '2.86'
#: Placement's GET /resource_classes
PLACEMENT_MICROVERSION = '1.2'


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'flavor', help='Create GPU flavors with the right extra specs.')
    actions = parser.add_subparsers(dest='flavor_action', metavar='ACTION')
    actions.required = True
    create = actions.add_parser(
        'create',
        help='Create a GPU flavor.',
        description=(
            "Create a Nova flavor that asks for GPUs: Nova's own keys "
            "(resources:CUSTOM_VGPU_<MODEL> or pci_passthrough:alias, "
            "trait:...=required) "
            "and gpu-nova-ext's gpu: keys.  Credentials come from "
            "clouds.yaml (--os-cloud / OS_CLOUD) or OS_* variables, as for "
            "every OpenStack client; the flavor needs an admin."))
    create.add_argument('name', metavar='NAME', help='Flavor name.')
    create.add_argument(
        '--model', required=True, metavar='M',
        help='GPU model, normalized (A100_80GB_PCIE) or a prefix at a _ '
             'boundary (A100) for vGPU; the full model for passthrough.')
    create.add_argument('--count', type=int, default=1, metavar='N',
                        help='GPUs (or vGPUs) per server (default 1).')
    create.add_argument('--mode', choices=flavor.MODES, default='vgpu',
                        help='vgpu (default) or passthrough.')
    create.add_argument(
        '--vgpu-type', metavar='T',
        help='vGPU type id or name (nvidia-471, A100D-10C); required with '
             '--vgpu-backend vfio.')
    create.add_argument(
        '--vgpu-backend', choices=flavor.VGPU_BACKENDS, default='mdev',
        help='mdev (default; libvirt mediated devices, MIG-backed too) or '
             'vfio (NVIDIA vendor-specific VFIO vGPU on SR-IOV VFs).')
    create.add_argument(
        '--vgpu-class', choices=flavor.VGPU_CLASSES, default='model',
        help='mdev vGPU: ask resources:CUSTOM_VGPU_<MODEL> (default; hosts '
             'configured by nova-conf, --model must be the full model) or '
             "resources:VGPU (hosts that keep Nova's default class).")
    create.add_argument('--memory-min', metavar='SIZE',
                        help='Minimum GPU (or vGPU framebuffer) memory, e.g. '
                             '16GB or 10240.')
    create.add_argument('--vendor', choices=('nvidia', 'amd', 'intel'))
    create.add_argument('--mig', action='store_true',
                        help='Require GPUs in MIG mode (MIG-backed vGPU).')
    create.add_argument(
        '--exact-model', action='store_true',
        help='--model is the full model: also require the '
             'CUSTOM_GPU_MODEL_<M> trait, so Placement prunes hosts.')
    create.add_argument('--alias', metavar='NAME',
                        help='[pci] alias to request (default: the one '
                             'nova-conf generates for the model or type).')
    create.add_argument(
        '--pci-accounting', choices=flavor.PCI_ACCOUNTING,
        default='placement',
        help="Passthrough: who counts the GPUs in Placement: Nova's PCI in "
             "Placement (default) or the agent's inventory mode.")
    create.add_argument('--cuda-cc-min', metavar='X.Y')
    create.add_argument('--driver-min', metavar='VERSION')
    create.add_argument('--health', choices=flavor.HEALTH)
    create.add_argument('--intra-host-policy', choices=flavor.POLICIES)
    create.add_argument('--vcpus', type=int, default=4)
    create.add_argument('--ram', type=int, default=16384, metavar='MB')
    create.add_argument('--disk', type=int, default=40, metavar='GB')
    create.add_argument('--private', action='store_true',
                        help='Create a private flavor.')
    create.add_argument('--description')
    create.add_argument(
        '--os-cloud', default=os.environ.get('OS_CLOUD'), metavar='CLOUD',
        help='Cloud of clouds.yaml (default: $OS_CLOUD).')
    create.add_argument('--dry-run', action='store_true',
                        help='Print the flavor and its extra specs; create '
                             'nothing.')
    create.set_defaults(func=run)


def plan_from_args(args: argparse.Namespace) -> flavor.FlavorPlan:
    req = flavor.GpuFlavorRequest(
        model=args.model, count=args.count, mode=args.mode,
        vgpu_type=args.vgpu_type, vgpu_backend=args.vgpu_backend,
        memory_min=args.memory_min, vendor=args.vendor, mig=args.mig,
        exact_model=args.exact_model, alias=args.alias,
        pci_accounting=args.pci_accounting, vgpu_class=args.vgpu_class,
        cuda_cc_min=args.cuda_cc_min,
        driver_min=args.driver_min, health=args.health,
        intra_host_policy=args.intra_host_policy)
    for what in ('vcpus', 'ram', 'disk'):
        if getattr(args, what) < (0 if what == 'disk' else 1):
            raise exception.GpuNovaExtException(
                'Invalid --%s %r: give a positive number.'
                % (what, getattr(args, what)))
    return flavor.FlavorPlan(
        name=args.name, vcpus=args.vcpus, ram=args.ram, disk=args.disk,
        is_public=not args.private, extra_specs=flavor.extra_specs(req),
        description=args.description, quota_class=flavor.quota_class(req))


def connect(cloud: str | None):
    """An openstacksdk connection from clouds.yaml / OS_* variables."""
    from keystoneauth1 import exceptions as ks_exc
    import openstack
    from openstack import exceptions as os_exc
    try:
        conn = openstack.connect(cloud=cloud)
        conn.authorize()
    except (os_exc.SDKException, ks_exc.ClientException) as exc:
        # no credentials at all: keystoneauth's MissingRequiredOptions
        raise exception.GpuNovaExtException(
            'Cannot connect to the cloud%s: %s. Set OS_CLOUD (clouds.yaml) '
            'or the OS_* variables as for the openstack client.'
            % (' %r' % cloud if cloud else '', exc))
    return conn


def check_resource_class(conn, plan: flavor.FlavorPlan) -> None:
    """Refuse a flavor asking a custom class no host offers (never lands).

    ``--model A100`` with the per-model vGPU class asks
    ``CUSTOM_VGPU_A100``, while hosts offer ``CUSTOM_VGPU_A100_80GB_PCIE``.
    """
    from openstack import exceptions as os_exc

    from gpu_nova_ext.operator import quota
    rc = plan.quota_class
    if not (rc or '').startswith('CUSTOM_') or (
            'resources:%s' % rc not in plan.extra_specs):
        return
    try:
        # plain REST: openstacksdk's Placement proxy needs version discovery
        resp = conn.placement.get('/resource_classes',
                                  microversion=PLACEMENT_MICROVERSION)
        os_exc.raise_from_response(resp)
        names = [c['name'] for c in resp.json()['resource_classes']]
    except os_exc.SDKException as exc:
        print('warning: could not check that Placement knows %s: %s'
              % (rc, exc), file=sys.stderr)
        return
    if rc in names:
        return
    known = sorted(c.label for c in quota.gpu_classes(names))
    raise exception.GpuNovaExtException(
        'No host offers resource class %s, so flavor %r would land nowhere. '
        'GPU classes in Placement: %s. Give the full model (gpu-nova-ext '
        'audit), configure the hosts first (gpu-nova-ext nova-conf), or use '
        "--vgpu-class vgpu for hosts that keep Nova's VGPU."
        % (rc, plan.name, ', '.join(known) or 'none'))


def create(conn, plan: flavor.FlavorPlan):
    """Create the flavor and set its extra specs; undo on failure."""
    from openstack import exceptions as os_exc
    if conn.compute.find_flavor(plan.name, ignore_missing=True):
        raise exception.GpuNovaExtException(
            'A flavor named %r exists already. Choose another NAME or '
            'delete it first (openstack flavor delete %s).'
            % (plan.name, plan.name))
    check_resource_class(conn, plan)
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
    return made


def run(args: argparse.Namespace, conf: cfg.ConfigOpts,
        conn_factory=connect) -> int:
    plan = plan_from_args(args)
    if args.dry_run:
        print('flavor %s: vcpus=%d ram=%dMB disk=%dGB %s' % (
            plan.name, plan.vcpus, plan.ram, plan.disk,
            'public' if plan.is_public else 'private'))
        width = max(len(k) for k in plan.extra_specs)
        for key, value in plan.extra_specs.items():
            print('  %-*s = %s' % (width, key, value))
        print('Quota: each server counts %s against class:%s.' % (
            args.count, plan.quota_class))
        print('\nSame as:\n%s' % plan.openstack_cli())
        return 0
    made = create(conn_factory(args.os_cloud), plan)
    print('Created flavor %s (%s) with %d extra specs; quota counts its '
          'GPUs as class:%s.' % (plan.name, made.id, len(plan.extra_specs),
                                 plan.quota_class), file=sys.stderr)
    return 0
