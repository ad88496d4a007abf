# SPDX-License-Identifier: Apache-2.0

"""What ``gpu-nova-ext remediate`` takes from the cloud, and the failed
moves of remediate and ``openstack gpu host drain`` as exit code 2."""
import argparse
import os
import sys

from gpu_nova_ext import exception


def add_cloud_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--os-cloud', default=os.environ.get('OS_CLOUD'), metavar='CLOUD',
        help='Cloud of clouds.yaml (default: $OS_CLOUD, then [remediation] '
             'cloud, then the OS_* variables).')


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


def connections(args, conf, conn_factory=None, placement_factory=None):
    """(openstacksdk connection, Placement client) for a command."""
    from gpu_nova_ext.placement import client as placement_client
    conn = (conn_factory or connect)(
        args.os_cloud or conf.remediation.cloud)
    placement = (placement_factory or placement_client.PlacementClient)(conf)
    return conn, placement


def report(line: str) -> None:
    print(line, flush=True)


def check_results(results, what: str) -> int:
    """0 when every move worked; a typed error naming the failures else."""
    failed = [r for r in results if r.outcome == 'failed']
    if failed:
        raise exception.GpuNovaExtException(
            '%d of %d server(s) of %s could not be moved (each is listed '
            'above with its cause): fix the cause, then run the command '
            'again.' % (len(failed), len(results), what))
    print('%s: %d server(s) looked at, %d moved.' % (
        what, len(results), sum(r.outcome == 'moved' for r in results)),
        file=sys.stderr)
    return 0
