# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu quota set|unset|show|check``: GPU quota per model.

Limits live in Keystone (unified limits, per service and region: what
Nova's oslo.limit reads), usage in Placement (``GET /usages``).  See
:mod:`gpu_nova_ext.operator.quota` for the resource classes of a model.

``quota show -f json`` keys: ``project`` (``(default)`` for the registered
limits), ``model``, ``kind``, ``resource``, ``limit`` (None: no limit, -1:
unlimited), ``from`` (``project``, ``default``, ``registered`` or
``none``), ``used`` and ``over``.
"""
import argparse
import urllib.parse

from gpu_nova_ext import exception
from gpu_nova_ext.operator import quota
from gpu_nova_ext.operator import quota_keystone
from gpu_nova_ext.operator import quota_migration
from gpu_nova_ext.osc import command

KINDS = (quota.PASSTHROUGH, quota.VGPU, quota.VGPU_VFIO)
#: Placement microversions: /resource_classes (1.2), /usages (1.9)
USAGES_VERSION = '1.9'
ENFORCED_BY = ("Nova enforces these limits with [quota] driver = "
               "nova.quota.UnifiedLimitsDriver and [oslo_limit] pointed at "
               "this service (nova-api, nova-conductor).")
SHOW_COLUMNS = ('project', 'model', 'kind', 'resource', 'limit', 'from',
                'used', 'over')


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


def _several(classes, limit, _say) -> None:
    if len(classes) > 1:
        _say('note: Keystone counts each class on its own: %s applies to '
             'each of the %d classes above, not to their sum.'
             % (quota.limit_text(limit), len(classes)))


def do_set(args, store, placement, classes, _say) -> int:
    registered = store.registered()
    if args.default:
        for c in classes:
            old = registered.get(c.resource_name)
            store.set_default(c.resource_name, args.limit, old)
            _say('default %s (%s): %s -> %s' % (
                c.resource_name, c.label, quota.limit_text(
                    old.default_limit if old else None),
                quota.limit_text(args.limit)))
        _several(classes, args.limit, _say)
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
    _several(classes, args.limit, _say)
    for r in overs:
        _say('warning: ' + quota.overage_line(r))
    return 0


def do_unset(args, store, placement, classes, _say) -> int:
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


def _project_or_id(store, project_id: str, _say):
    """The project of a limit; one Keystone no longer has, by its id."""
    try:
        return store.find_project(project_id)
    except exception.InvalidArgument:
        _say('warning: project %s has limits but is not in Keystone any '
             'more; shown by id.' % project_id)
        return argparse.Namespace(id=project_id, name=project_id)


def do_check(args, conn, store, _say) -> int:
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
    for line in quota_migration.commands(lost, store.region_id):
        _say('  ' + line)
    return 1


def add_limits_service_args(parser) -> None:
    """Where the limits live: Nova's endpoint and region."""
    parser.add_argument('--endpoint-id', metavar='<id>',
                        help="Nova's [oslo_limit] endpoint_id (default: "
                             'the compute service of the catalog).')
    parser.add_argument('--region', metavar='<region>',
                        help="Region of the limits (default: the compute "
                             "endpoints' one region).")


def add_selector_args(parser, change: bool) -> None:
    """--project/--default, --model, --kind of set, unset and show."""
    who = parser.add_mutually_exclusive_group(required=change)
    who.add_argument('--project', metavar='<project>',
                     help='Keystone project name or id.')
    if change:
        who.add_argument('--default', action='store_true',
                         help='The cloud-wide default (registered limit) '
                              'instead of one project.')
    parser.add_argument(
        '--model', required=change, metavar='<model>',
        help='GPU model (A100 matches A100_80GB_PCIE) or a resource class '
             '(CUSTOM_GPU_L4).')
    parser.add_argument('--kind', choices=KINDS,
                        help='Only this way of offering the model.')
    add_limits_service_args(parser)


def gpu_classes(client, args) -> list:
    """The GPU classes of ``args``; none at all is a typed error."""
    classes = _classes(client.placement, args)
    if not classes:
        raise exception.InvalidArgument(
            'Placement has no GPU resource class%s: configure the hosts '
            'with gpu-nova-ext nova-conf first.'
            % (' of kind %s' % args.kind if args.kind else ''))
    return classes


class _Change(command.Command):
    """set and unset: one project's limit or the default, then a note."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_selector_args(parser, change=True)
        return parser

    def take_action(self, parsed_args):
        client = self.app.client_manager.gpu
        classes = gpu_classes(client, parsed_args)
        store = quota_keystone.LimitStore(client.conn,
                                          parsed_args.endpoint_id,
                                          parsed_args.region)
        self.change(parsed_args, store, client.placement, classes, self.say)
        self.app.stderr.write(ENFORCED_BY + '\n')


class SetQuota(_Change):
    """Set a project's GPU limit of a model, or the cloud-wide default."""

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--limit', required=True, metavar='<n>',
                            help='GPUs (vGPUs) of the model; -1 for '
                                 'unlimited.')
        return parser

    def take_action(self, parsed_args):
        parsed_args.limit = quota.parse_limit(parsed_args.limit)
        return super().take_action(parsed_args)

    change = staticmethod(do_set)


class UnsetQuota(_Change):
    """Remove a project limit (the default applies again) or a default."""

    change = staticmethod(do_unset)


class ShowQuota(command.Lister):
    """Show the GPU limits and usage per project and model.

    The registered limits (project ``(default)``), then each project with
    a GPU project limit, or the one of --project.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        add_selector_args(parser, change=False)
        return parser

    def take_action(self, parsed_args):
        args = parsed_args
        client = self.app.client_manager.gpu
        classes = gpu_classes(client, args)
        store = quota_keystone.LimitStore(client.conn, args.endpoint_id,
                                          args.region)
        registered = store.registered()
        warn = self.app.stderr.write
        out = []
        for c in classes:
            reg = registered.get(c.resource_name)
            out.append(('(default)', c.model, c.kind, c.resource_name,
                        reg.default_limit if reg else None, 'registered',
                        None, None))
        names = {c.resource_name for c in classes}
        if args.project:
            projects = [store.find_project(args.project)]
        else:
            ids = sorted({lim.project_id for lim in store.project_limits()
                          if lim.resource_name in names})
            projects = [_project_or_id(store, i, lambda line: warn(
                line + '\n')) for i in ids]
        rows = []
        for project in projects:
            limits = {lim.resource_name: lim.resource_limit
                      for lim in store.project_limits(project.id)}
            usage = _usage(client.placement, project.id)
            for c in classes:
                reg = registered.get(c.resource_name)
                r = quota.row(project.name, c, limits.get(c.resource_name),
                              reg.default_limit if reg else None,
                              usage.get(c.resource_class, 0))
                if args.project or args.model or r.source == 'project':
                    rows.append(r)
        out += [(r.project, r.gpu.model, r.gpu.kind, r.gpu.resource_name,
                 r.limit, r.source, r.usage, r.over) for r in rows]
        if not args.project:
            warn('note: the projects with a GPU project limit are shown; '
                 'any other project has the defaults (pass --project P to '
                 'see its usage)\n')
        for r in rows:
            if r.over:
                warn('warning: %s\n' % quota.overage_line(r))
        if 'servers' not in registered:
            warn("warning: no registered limit for 'servers': Nova with "
                 'unified limits and its default [quota] '
                 'unified_limits_resource_strategy = require refuses every '
                 'server until one exists.\n')
        return SHOW_COLUMNS, out


class CheckQuota(command.Command):
    """What switching Nova to unified limits would lose.

    The legacy quotas (Nova's database) that Keystone does not hold yet,
    and the nova-manage commands that copy them.  Exit code 1 when
    something would be lost.
    """

    def get_parser(self, prog_name):
        parser = super().get_parser(prog_name)
        parser.add_argument('--project', metavar='<project>',
                            help='Only this Keystone project (name or id); '
                                 'default: every project.')
        add_limits_service_args(parser)
        return parser

    def take_action(self, parsed_args):
        conn = self.app.client_manager.gpu.conn
        return do_check(parsed_args, conn, quota_keystone.LimitStore(
            conn, parsed_args.endpoint_id, parsed_args.region), self.say)
