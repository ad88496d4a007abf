# SPDX-License-Identifier: Apache-2.0

"""The OpenStackClient plugin of gpu-nova-ext: ``openstack gpu ...``.

Registered under ``openstack.cli.extension`` (setup.cfg), as every
OpenStack service's client plugin is; its commands are the
``openstack.gpu.v1`` entry points.  The client they get
(``self.app.client_manager.gpu``) is a
:class:`~gpu_nova_ext.osc.client.GpuClient` over osc-lib's authenticated
session: Nova and Keystone through openstacksdk, Placement through our
Placement client, every one found in the service catalog of the cloud of
clouds.yaml (or ``OS_*``), so no configuration file is needed.

OpenStackClient imports this module for every ``openstack`` command: it
imports nothing heavy.
"""
from osc_lib import utils

API_NAME = 'gpu'
API_VERSION_OPTION = 'os_gpu_api_version'
DEFAULT_API_VERSION = '1'
#: the command groups (openstack.gpu.v1), as a version -> client mapping
#: as every OpenStackClient release reads it (``1.0`` is the same API as
#: ``1``); Placement's microversion is negotiated by the client, not chosen
#: here
API_VERSIONS = {
    '1': 'gpu_nova_ext.osc.client.GpuClient',
    '1.0': 'gpu_nova_ext.osc.client.GpuClient',
}


def make_client(instance):
    """The ``gpu`` client of osc-lib's ClientManager ``instance``."""
    from gpu_nova_ext.osc import client
    return client.GpuClient(instance)


def build_option_parser(parser):
    """``--os-gpu-api-version``, as other plugins add theirs."""
    parser.add_argument(
        '--os-gpu-api-version', metavar='<gpu-api-version>',
        default=utils.env('OS_GPU_API_VERSION'),
        help='gpu-nova-ext command API version, default=%s (Env: '
             'OS_GPU_API_VERSION). The Placement microversion each '
             'command needs is checked against what Placement serves.'
             % DEFAULT_API_VERSION)
    return parser
