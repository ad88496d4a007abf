# SPDX-License-Identifier: Apache-2.0

"""Draining a GPU host: its nova-compute disabled, its servers moved.

Design doc: Remediation, drains and driver roll-outs.  ``openstack gpu
host drain`` and ``openstack gpu rollout run`` drain with :func:`drain`;
the moves are remediation's (:mod:`gpu_nova_ext.operator.remediate`),
following the ``[remediation]`` options.
"""
from collections.abc import Callable

from gpu_nova_ext.operator import nova_actions
from gpu_nova_ext.operator import remediate
from gpu_nova_ext.operator import remediation_policy as policy

#: the start of the disabled reason of a host drained by gpu-nova-ext
#: (undrain and roll-outs enable only such a host)
REASON_PREFIX = 'gpu-nova-ext drain: '


def summary(decisions) -> str:
    """``2 to live-migrate, 1 to stay``."""
    return ', '.join('%d to %s' % (n, a) for a, n in sorted(
        policy.summary(decisions).items())) or 'nothing to do'


def drain(conf, conn, placement, host: str, service, *, reason: str,
          migrate: bool, all_servers: bool, dry_run: bool,
          say: Callable[[str], None]) -> list:
    """Disable ``host``'s nova-compute; with ``migrate``, move its servers.

    ``migrate`` moves the servers on its GPUs, ``all_servers`` every
    server of the host.  Returns remediation's results (none when nothing
    is moved).
    """
    if dry_run:
        say('dry run: would disable nova-compute on %s (%s)' % (host,
                                                                reason))
    else:
        nova_actions.set_service_status(conn, host, enabled=False,
                                        reason=REASON_PREFIX + reason)
        say('disabled nova-compute on %s (was %s): %s' % (
            host, service.status, reason))
    if not (migrate or all_servers):
        return []
    remediator = remediate.Remediator(conf, conn, placement, report=say,
                                      dry_run=dry_run)
    trigger = policy.Trigger(host=host, reason='drain: ' + reason,
                             source='drain')
    decisions = remediator.plan(trigger, policy_name='migrate')
    say('%s: %d server(s) on its GPUs: %s' % (host, len(decisions),
                                              summary(decisions)))
    if all_servers:
        others = policy.decide(
            trigger, nova_actions.host_servers(
                conn, host, {d.server for d in decisions}),
            'migrate', compute_up=nova_actions.service_up(service))
        say('%s: %d other server(s): %s' % (host, len(others),
                                            summary(others)))
        decisions += others
    return remediator.execute(trigger, decisions)
