# SPDX-License-Identifier: Apache-2.0

"""[remediation] options: what ``gpu-nova-ext remediate`` and ``openstack
gpu host drain --migrate`` do with the servers of an unhealthy GPU or a
drained host."""
from oslo_config import cfg

from gpu_nova_ext.conf import utils

remediation_group = cfg.OptGroup(
    'remediation',
    title='GPU remediation options',
    help='How gpu-nova-ext remediate and drain --migrate move servers off '
         'unhealthy GPUs and drained hosts.')

POLICIES = ('notify', 'migrate', 'evacuate')

remediation_opts = [
    cfg.BoolOpt(
        'enabled',
        default=False,
        help="""
Act on what the policy decides.  False (the default) is a dry run: every
decision is printed, logged and notified as ``would`` and no server is
touched.  ``--enable`` on the command line sets it for one run.
"""),
    cfg.StrOpt(
        'policy',
        default='migrate',
        choices=[
            ('notify', 'Only log and notify which servers sit on the '
                       'unhealthy GPU.'),
            ('migrate', 'Live-migrate the servers where Nova can (vGPU '
                        'servers; passthrough servers when '
                        'passthrough_live_migration is set), '
                        'cold-migrate the others.  A server whose compute '
                        'service is down is reported, not moved.'),
            ('evacuate', 'As migrate, and evacuate the servers of a host '
                         'whose nova-compute service is down.'),
        ],
        help="""
What to do with the servers of a GPU that turns unhealthy.
"""),
    cfg.BoolOpt(
        'passthrough_live_migration',
        default=False,
        help="""
Try live migration for servers with passed-through GPUs too.  Set it only
when the ``[pci] device_spec`` and ``alias`` entries of the GPUs say
``live_migratable``; when Nova refuses a live migration the server is
cold-migrated instead.
"""),
    cfg.IntOpt(
        'max_concurrent',
        default=4,
        min=1,
        max=100,
        help="""
Migrations in flight at once, cloud-wide.
"""),
    cfg.IntOpt(
        'max_concurrent_per_host',
        default=1,
        min=1,
        max=20,
        help="""
Migrations in flight at once from one source host.

Related options: ``max_concurrent`` (the cloud-wide limit applies too).
"""),
    cfg.IntOpt(
        'max_retries',
        default=2,
        min=0,
        max=10,
        help="""
Times a failed migration is tried again, after ``retry_backoff`` seconds
doubling each time, before it is reported as an error and left alone.
"""),
    cfg.FloatOpt(
        'retry_backoff',
        default=30.0,
        min=0.0,
        help="""
Seconds before the first retry of a failed migration; doubles each retry.
"""),
    cfg.IntOpt(
        'action_timeout',
        default=1800,
        min=1,
        help="""
Seconds a migration or evacuation may take before it counts as failed
(the server is then reported, and retried as ``max_retries`` says).
"""),
    cfg.FloatOpt(
        'poll_interval',
        default=2.0,
        min=0.01,
        help="""
Seconds between two looks at a server being moved.
"""),
    cfg.IntOpt(
        'sweep_interval',
        default=300,
        min=0,
        help="""
Seconds between two looks at the whole cloud (the GPUs the schedulers know
as unhealthy) by the daemon, as a fallback for missed ``gpu.health.update``
notifications.  0 disables the sweep.

Related options: ``state_wait``.
"""),
    cfg.FloatOpt(
        'state_wait',
        default=10.0,
        min=0.0,
        help="""
Seconds a sweep listens for the agents' GPU state (on ``transport_url``)
to learn which GPUs are unhealthy.
"""),
    cfg.StrOpt(
        'cloud',
        help="""
Cloud of clouds.yaml to reach Nova with.  Unset: ``OS_CLOUD`` or the
``OS_*`` environment variables, as for every OpenStack client.
"""),
    cfg.StrOpt(
        'listen_topic',
        default='notifications',
        help="""
Notification topic to hear ``gpu.health.update`` on (the agents'
``[oslo_messaging_notifications] topics``).
"""),
    cfg.StrOpt(
        'listener_pool',
        default='gpu-nova-ext-remediation',
        help="""
oslo.messaging listener pool of the remediation daemon: its own queue on
``listen_topic``, so every notification reaches it as well as every other
consumer of the topic (Ceilometer, a second remediation daemon in another
pool).  Daemons that share a pool share the stream, each message going to
one of them: give two daemons the same pool only to split the work.

Related options:

* ``listen_topic``
"""),
]


def register_opts(conf):
    utils.register_group(conf, remediation_group)
    conf.register_opts(remediation_opts, group=remediation_group)


def list_opts():
    return {remediation_group: remediation_opts}
