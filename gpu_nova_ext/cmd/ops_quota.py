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

"""``gpu-nova-ext quota set|unset|show``: GPU quota per model.

Limits live in Keystone (unified limits, per service and region: what
Nova's oslo.limit reads), usage in Placement (``GET /usages``).  See
:mod:`gpu_nova_ext.operator.quota` for the resource classes of a model.
"""
import argparse
import sys
import urllib.parse

from oslo_config import cfg

from gpu_nova_ext.cmd import ops_common
from gpu_nova_ext import exception
from gpu_nova_ext.operator import quota
from gpu_nova_ext.operator import quota_keystone
from gpu_nova_ext.operator import quota_migration

KINDS = (quota.PASSTHROUGH, quota.VGPU, quota.VGPU_VFIO)
#: Placement microversions: /resource_classes (1.2), /usages (1.9)
USAGES_VERSION = '1.9'
ENFORCED_BY = ("Nova enforces these limits with [quota] driver = "
               "nova.quota.UnifiedLimitsDriver and [oslo_limit] pointed at "
               "this service (nova-api, nova-conductor).")


def _add_limits_service_args(sub) -> None:
    """Where the limits live (Nova's endpoint, region), the cloud, run."""
    sub.add_argument('--endpoint-id', metavar='ID',
                     help="Nova's [oslo_limit] endpoint_id (default: "
                          'the compute service of the catalog).')
    sub.add_argument('--region', metavar='R',
                     help="Region of the limits (default: the compute "
                          "endpoints' one region).")
    ops_common.add_cloud_arg(sub)
    sub.set_defaults(func=run)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        'quota', help='GPU quota per model (Keystone unified limits).',
        description=(
            'Limit the GPUs of each model a project may use, through '
            "Keystone's unified limits that Nova enforces on the per-model "
            'resource classes (CUSTOM_GPU_<MODEL>, CUSTOM_VGPU_<MODEL>, '
            'CUSTOM_GPU_VGPU_<TYPE>).  Usage comes from Placement.'))
    actions = parser.add_subparsers(dest='quota_action', metavar='ACTION')
    actions.required = True
    for name, text in (
            ('set', 'Set a project limit or the cloud-wide default.'),
            ('unset', 'Remove a project limit (the default applies again) '
                      'or a default.'),
            ('show', 'Limits and usage per project and model.')):
        sub = actions.add_parser(name, help=text, description=text)
        who = sub.add_mutually_exclusive_group(required=name != 'show')
        who.add_argument('--project', metavar='P',
                         help='Keystone project name or id.')
        if name != 'show':
            who.add_argument('--default', action='store_true',
                             help='The cloud-wide default (registered '
                                  'limit) instead of one project.')
        sub.add_argument(
            '--model', required=name != 'show', metavar='M',
            help='GPU model (A100 matches A100_80GB_PCIE) or a resource '
                 'class (CUSTOM_GPU_L4).')
        sub.add_argument('--kind', choices=KINDS,
                         help='Only this way of offering the model.')
        if name == 'set':
            sub.add_argument('--limit', required=True, metavar='N',
                             help='GPUs (vGPUs) of the model; -1 for '
                                  'unlimited.')
        _add_limits_service_args(sub)
    text = ('Before switching Nova to unified limits: the legacy quotas '
            "(Nova's database) that Keystone does not hold yet and that "
            'the switch would therefore lose, and the nova-manage '
            'commands that copy them.  Exit code 1 when something would '
            'be lost.')
    check = actions.add_parser(
        'check', help='What the switch to unified limits would lose.',
        description=text)
    check.add_argument('--project', metavar='P',
                       help='Only this Keystone project (name or id); '
                            'default: every project.')
    _add_limits_service_args(check)


def _classes(placement, args) -> list[quota.GpuClass]:
    body = placement.get('/resource_classes', version=USAGES_VERSION)
    classes = quota.gpu_classes(rc['name'] for rc in body['resource_classes'])
    if args.kind:
        classes = [c for c in classes if c.kind == args.kind]
    if args.model:
        return quota.resolve_model(args.model, classes, args.kind)
    return classes


def _usage(placement, project_id: str) -> dict[str, int]:
    path = '/usages?project_id=%s' % urllib.parse.quote(project_id, safe='')
    return placement.get(path, version=USAGES_VERSION)['usages']


def _say(line: str) -> None:
    print(line, flush=True)


def _several(classes, limit) -> None:
    if len(classes) > 1:
        _say('note: Keystone counts each class on its own: %s applies to '
             'each of the %d classes above, not to their sum.'
             % (quota.limit_text(limit), len(classes)))


def do_set(args, store, placement, classes) -> int:
    registered = store.registered()
    if args.default:
        for c in classes:
            old = registered.get(c.resource_name)
            store.set_default(c.resource_name, args.limit, old)
            _say('default %s (%s): %s -> %s' % (
                c.resource_name, c.label, quota.limit_text(
                    old.default_limit if old else None),
                quota.limit_text(args.limit)))
        _several(classes, args.limit)
        _say('note: every project without a limit of its own has this one '
             'now; usage is not checked against it here (quota show '
             '--project P shows one project\'s usage and overage).')
        return 0
    project = store.find_project(args.project)
    usage = _usage(placement, project.id)
    limits = {lim.resource_name: lim
              for lim in store.project_limits(project.id)}
    overs = []
    for c in classes:
        if c.resource_name not in registered:
            store.set_default(c.resource_name, quota.UNLIMITED)
            _say('default %s (%s): none -> unlimited (Keystone needs a '
                 'registered limit before a project limit; -1 limits no '
                 'other project)' % (c.resource_name, c.label))
        old = limits.get(c.resource_name)
        store.set_project(project.id, c.resource_name, args.limit, old)
        r = quota.row(project.name, c, args.limit, None,
                      usage.get(c.resource_class, 0))
        _say('project %s: %s (%s): %s -> %s, used %d' % (
            project.name, c.resource_name, c.label, quota.limit_text(
                old.resource_limit if old else None),
            quota.limit_text(args.limit), r.usage))
        if r.over:
            overs.append(r)
    _several(classes, args.limit)
    for r in overs:
        _say('warning: ' + quota.overage_line(r))
    return 0


def do_unset(args, store, placement, classes) -> int:
    registered = store.registered()
    if args.default:
        users = {}
        for lim in store.project_limits():
            users.setdefault(lim.resource_name, []).append(lim.project_id)
        for c in classes:
            if users.get(c.resource_name):
                raise exception.InvalidArgument(
                    '%s still has project limits (projects %s): remove '
                    'them first with quota unset --project P.' % (
                        c.resource_name,
                        ', '.join(sorted(users[c.resource_name]))))
        for c in classes:
            old = registered.get(c.resource_name)
            if old is None:
                _say('default %s (%s): none set, nothing to remove'
                     % (c.resource_name, c.label))
                continue
            store.delete_default(old)
            _say('default %s (%s): %s removed' % (
                c.resource_name, c.label,
                quota.limit_text(old.default_limit)))
        return 0
    project = store.find_project(args.project)
    limits = {lim.resource_name: lim
              for lim in store.project_limits(project.id)}
    for c in classes:
        old = limits.get(c.resource_name)
        if old is None:
            _say('project %s: %s (%s): no project limit, nothing to remove'
                 % (project.name, c.resource_name, c.label))
            continue
        store.delete_project(old)
        default = registered.get(c.resource_name)
        _say('project %s: %s (%s): limit %s removed; the default %s '
             'applies now' % (
                 project.name, c.resource_name, c.label,
                 quota.limit_text(old.resource_limit), quota.limit_text(
                     default.default_limit if default else None)))
    return 0


def do_show(args, store, placement, classes) -> int:
    registered = store.registered()
    _say('Defaults (registered limits, service %s, region %s):'
         % (store.service_id, store.region_id or '-'))
    for c in classes:
        reg = registered.get(c.resource_name)
        _say('  %-40s %-24s %s' % (c.resource_name, c.label,
                                   quota.limit_text(
                                       reg.default_limit if reg else None)))
    names = {c.resource_name for c in classes}
    if args.project:
        projects = [store.find_project(args.project)]
    else:
        ids = sorted({lim.project_id for lim in store.project_limits()
                      if lim.resource_name in names})
        projects = [_project_or_id(store, i) for i in ids]
    rows = []
    for project in projects:
        limits = {lim.resource_name: lim.resource_limit
                  for lim in store.project_limits(project.id)}
        usage = _usage(placement, project.id)
        for c in classes:
            reg = registered.get(c.resource_name)
            r = quota.row(project.name, c, limits.get(c.resource_name),
                          reg.default_limit if reg else None,
                          usage.get(c.resource_class, 0))
            if args.project or args.model or r.source == 'project':
                rows.append(r)
    _say('')
    for line in quota.render(rows):
        _say(line)
    if not args.project:
        _say('(projects with a GPU project limit; any other project has '
             'the defaults: pass --project P to see its usage)')
    for r in rows:
        if r.over:
            _say('warning: ' + quota.overage_line(r))
    if 'servers' not in registered:
        _say("warning: no registered limit for 'servers': Nova with "
             'unified limits and its default [quota] '
             'unified_limits_resource_strategy = require refuses every '
             'server until one exists.')
    return 0


def _project_or_id(store, project_id: str):
    """The project of a limit; one Keystone no longer has, by its id."""
    try:
        return store.find_project(project_id)
    except exception.InvalidArgument:
        _say('warning: project %s has limits but is not in Keystone any '
             'more; shown by id.' % project_id)
        return argparse.Namespace(id=project_id, name=project_id)


def do_check(args, conn, store) -> int:
    """Legacy quotas the switch to unified limits would lose."""
    from openstack import exceptions as os_exc
    if args.project:
        projects = [store.find_project(args.project)]
    else:
        projects = sorted(conn.identity.projects(), key=lambda p: p.name)
    if not projects:
        raise exception.GpuNovaExtException('Keystone has no project.')

    def quota_set(method, project):
        try:
            qs = getattr(conn.compute, method)(project.id)
        except os_exc.SDKException as exc:
            raise quota_keystone.keystone_error(
                exc, 'read the quotas of project %s from Nova'
                % project.name)
        return {name: getattr(qs, name, None)
                for name in quota_migration.UNIFIED_NAMES}

    defaults = quota_set('get_quota_set_defaults', projects[0])
    legacy = {p.id: quota_set('get_quota_set', p) for p in projects}
    names = {p.id: p.name for p in projects}
    limits: dict[str, dict[str, int]] = {}
    for lim in store.project_limits():
        limits.setdefault(lim.project_id, {})[lim.resource_name] = (
            lim.resource_limit)
    registered = {name: r.default_limit
                  for name, r in store.registered().items()}
    findings = quota_migration.compare(defaults, legacy, registered, limits)
    _say('Legacy quotas (Nova) against unified limits (Keystone, service '
         '%s, region %s), %d project(s):' % (
             store.service_id, store.region_id or '-', len(projects)))
    for f in findings:
        _say('%-8s %s' % ('LOST' if f.lost else 'DIFFERS', f.line(names)))
    lost = [f for f in findings if f.lost]
    if not lost:
        _say('nothing would be lost: every legacy limit has its unified '
             'limit in Keystone%s.' % (
                 ' (DIFFERS: Keystone holds another value, which Nova '
                 'enforces after the switch)' if findings else ''))
        return 0
    _say('')
    _say('%d legacy limit(s) would be lost.  Copy them before the switch '
         '(on a host with nova.conf, as nova-manage reads the database and '
         '[keystone_authtoken]):' % len(lost))
    for command in quota_migration.commands(lost, store.region_id):
        _say('  ' + command)
    return 1


ACTIONS = {'set': do_set, 'unset': do_unset, 'show': do_show}


def run(args: argparse.Namespace, conf: cfg.ConfigOpts,
        conn_factory=None, placement_factory=None) -> int:
    if args.quota_action == 'set':
        args.limit = quota.parse_limit(args.limit)
    conn, placement = ops_common.connections(args, conf, conn_factory,
                                             placement_factory)
    if args.quota_action == 'check':
        return do_check(args, conn, quota_keystone.LimitStore(
            conn, args.endpoint_id, args.region))
    classes = _classes(placement, args)
    if not classes:
        raise exception.InvalidArgument(
            'Placement has no GPU resource class%s: configure the hosts '
            'with gpu-nova-ext nova-conf first.'
            % (' of kind %s' % args.kind if args.kind else ''))
    store = quota_keystone.LimitStore(conn, args.endpoint_id, args.region)
    rc = ACTIONS[args.quota_action](args, store, placement, classes)
    if args.quota_action != 'show':
        print(ENFORCED_BY, file=sys.stderr)
    return rc
