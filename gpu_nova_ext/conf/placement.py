# SPDX-License-Identifier: Apache-2.0

"""[placement] options: how the agent and the CLI reach Placement.

The standard keystoneauth session, auth and adapter options, so both a
Keystone-protected Placement (``auth_type = password``) and a noauth2 one
(``auth_type = admin_token``, ``endpoint = http://...``, ``token = admin``)
work; plus the retry policy of our requests, which keystoneauth carries
out (:func:`gpu_nova_ext.placement.client.retry_arguments`).
"""
from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from gpu_nova_ext.conf import utils

DEFAULT_SERVICE_TYPE = 'placement'
#: seconds a request to Placement (or Keystone) may take: a service that
#: accepts the connection and never answers must not hang the agent or the
#: CLI (keystoneauth's own default is to wait for ever)
DEFAULT_TIMEOUT = 30

placement_group = cfg.OptGroup(
    'placement',
    title='Placement service options',
    help='How gpu-nova-agent and gpu-nova-ext reach the Placement API.')

placement_opts = [
    cfg.IntOpt(
        'max_conflict_retries',
        default=5,
        min=0,
        help="""
Times a generation-checked write is re-read and retried after Placement
answers 409 ``placement.concurrent_update`` (another writer, usually
nova-compute, changed the provider in between).  Each retry waits a short
random (jittered) time first.
"""),
    cfg.IntOpt(
        'max_request_retries',
        default=3,
        min=0,
        help="""
Times a request is retried after a connection error or a 5xx answer before
the cycle gives up on it (the next cycle tries again).  keystoneauth does
the retrying: this is its ``connect_retries`` and ``status_code_retries``
(and the session's ``connect_retries`` for Keystone's token requests)
unless those options are set in this group.  A request that timed out is
not retried (see ``timeout``).

Related options: ``retry_backoff``; keystoneauth's ``connect_retries``,
``status_code_retries``, ``retriable_status_codes`` (default here: every
5xx).
"""),
    cfg.FloatOpt(
        'retry_backoff',
        min=0.0,
        help="""
Seconds between two retries of a request (keystoneauth's
``connect_retry_delay`` and ``status_code_retry_delay``, unless those are
set in this group).  Unset (the default): keystoneauth's exponential
backoff, 0.5 s before the first retry, doubling each time, at most 60 s.
0 retries at once.  A ``Retry-After`` header of Placement's answer wins.
Also scales the short random wait before a generation-conflict retry
(``max_conflict_retries``); 0 leaves that wait out.

Related options: ``max_request_retries``, ``max_conflict_retries``.
"""),
]


def _adapter_opts():
    opts = ks_loading.get_adapter_conf_options(include_deprecated=False)
    for opt in opts:
        if opt.dest == 'service_type':
            opt.default = DEFAULT_SERVICE_TYPE
        elif opt.dest == 'valid_interfaces':
            opt.default = ['internal', 'public']
    return opts


def _session_opts():
    """keystoneauth's session options, with a bounded request timeout."""
    timeout = cfg.FloatOpt(
        'timeout',
        default=DEFAULT_TIMEOUT,
        min=0.1,
        help="""
Seconds to wait for an answer from Placement (and Keystone) before giving up
on a request.  A request that timed out is not retried: the agent tries
again at its next cycle, and meanwhile keeps casting its GPU state; the CLI
reports the error.  keystoneauth's own default waits for ever, so a service
that accepts the connection and never answers would hang the agent and the
CLI.
""")
    return [timeout if o.dest == 'timeout' else o
            for o in ks_loading.get_session_conf_options()]


def register_opts(conf):
    # A fresh group: keystoneauth registers the auth plugin's options on
    # it when it loads a plugin, which must not leak to other configs.
    utils.register_group(conf, placement_group)
    conf.register_opts(placement_opts, group=placement_group)
    conf.register_opts(_session_opts(), group=placement_group)
    ks_loading.register_auth_conf_options(conf, placement_group.name)
    conf.register_opts(_adapter_opts(), group=placement_group)


def list_opts():
    return {
        placement_group: (
            placement_opts +
            _session_opts() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('admin_token') +
            ks_loading.get_auth_plugin_conf_options('v3password') +
            _adapter_opts())
    }
