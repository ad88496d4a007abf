# SPDX-License-Identifier: Apache-2.0

"""What the switch to unified limits would lose: legacy quotas vs Keystone.

Nova's ``[quota] driver = nova.quota.UnifiedLimitsDriver`` reads every
limit from Keystone; the legacy quotas in Nova's API database (the
defaults, and the per-project overrides set with ``openstack quota set``)
are no longer read.  ``nova-manage limits migrate_to_unified_limits``
copies the defaults, and a project's overrides only when run with that
project's ``--project-id``.  :func:`compare` tells, before the switch,
which legacy limits have no unified counterpart yet.  Pure: the caller
reads Nova's quota sets and Keystone's limits.
"""
import dataclasses

#: legacy quota name -> unified limit resource name.  Mirrors Nova 34's
#: ``nova.limit.placement.LEGACY_LIMITS`` and ``nova.limit.local.
#: LEGACY_LIMITS`` (inverted), and ``nova-manage limits
#: migrate_to_unified_limits``'s mirroring of ``cores`` to ``class:PCPU``;
#: a unit test compares it with Nova's own.
UNIFIED_NAMES = {
    'instances': 'servers',
    'cores': 'class:VCPU',
    'ram': 'class:MEMORY_MB',
    'metadata_items': 'server_metadata_items',
    'injected_files': 'server_injected_files',
    'injected_file_content_bytes': 'server_injected_file_content_bytes',
    'injected_file_path_bytes': 'server_injected_file_path_bytes',
    'key_pairs': 'server_key_pairs',
    'server_groups': 'server_groups',
    'server_group_members': 'server_group_members',
}
#: unified limits nova-manage creates from the legacy ``cores`` too
MIRRORED = {'class:PCPU': 'cores'}


@dataclasses.dataclass
class Finding:
    project: str | None          # None: a default (registered limit)
    legacy: str                  # legacy quota name
    resource_name: str           # unified limit it becomes
    legacy_limit: int
    unified_limit: int | None    # what Keystone has now (None: nothing)
    after_switch: int | None     # what Nova would enforce after the switch

    @property
    def lost(self) -> bool:
        return self.unified_limit is None

    def line(self, names: dict[str, str] | None = None) -> str:
        """One line; ``names``: project id -> name."""
        name = (names or {}).get(self.project)
        who = ('default' if self.project is None else
               'project %s (%s)' % (name, self.project) if name else
               'project %s' % self.project)
        after = ('no limit (unlimited, or 0 where [quota] '
                 'unified_limits_resource_strategy requires one: servers by '
                 'default)'
                 if self.after_switch is None else
                 _text(self.after_switch) + (
                     ' (the default)' if self.project and self.lost
                     else ''))
        return '%s: %s = %s (legacy %s) -> after the switch %s' % (
            who, self.resource_name, _text(self.legacy_limit), self.legacy,
            after)


def _text(limit: int) -> str:
    return 'unlimited' if limit is not None and limit < 0 else str(limit)


def _expand(quotas: dict) -> dict:
    """Legacy quotas as unified resource names -> (legacy name, limit)."""
    out = {}
    for legacy, limit in quotas.items():
        name = UNIFIED_NAMES.get(legacy)
        if name is None or limit is None:
            continue                 # obsolete (fixed_ips, ...)
        out[name] = (legacy, int(limit))
    for name, legacy in MIRRORED.items():
        if legacy in quotas and quotas[legacy] is not None:
            out[name] = (legacy, int(quotas[legacy]))
    return out


def compare(legacy_defaults: dict, legacy_projects: dict[str, dict],
            registered: dict[str, int],
            project_limits: dict[str, dict[str, int]]) -> list[Finding]:
    """Legacy limits Keystone does not hold (``lost``) or holds otherwise.

    :param legacy_defaults: Nova's quota defaults (legacy names)
    :param legacy_projects: project -> its legacy quota set; a value
        equal to the default is no override and is left out
    :param registered: Keystone's registered limits by resource name
    :param project_limits: project -> Keystone's project limits by
        resource name
    """
    findings = []
    defaults = _expand(legacy_defaults)
    for name, (legacy, limit) in sorted(defaults.items()):
        have = registered.get(name)
        if have != limit:
            findings.append(Finding(None, legacy, name, limit, have, have))
    for project in sorted(legacy_projects):
        mine = project_limits.get(project, {})
        for name, (legacy, limit) in sorted(_expand(
                legacy_projects[project]).items()):
            if name in defaults and defaults[name][1] == limit:
                continue             # the default, not an override
            have = mine.get(name)
            if have != limit:
                findings.append(Finding(
                    project, legacy, name, limit, have,
                    have if have is not None else registered.get(name)))
    return findings


def commands(findings: list[Finding], region: str | None) -> list[str]:
    """The nova-manage commands that copy what would be lost."""
    tail = ' --region-id %s' % region if region else ''
    out = []
    if any(f.project is None and f.lost for f in findings):
        out.append('nova-manage limits migrate_to_unified_limits%s' % tail)
    for project in sorted({f.project for f in findings
                           if f.project is not None and f.lost}):
        out.append('nova-manage limits migrate_to_unified_limits '
                   '--project-id %s%s' % (project, tail))
    return out
