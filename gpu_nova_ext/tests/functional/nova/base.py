# SPDX-License-Identifier: Apache-2.0

"""Nova's functional harness with gpu_nova_ext's plugins and agent.

What is real here: Nova's API, conductor, scheduler (with our filters and
weighers loaded from nova.conf as an operator sets them), nova-compute
with the libvirt driver on Nova's fakelibvirt, Placement, oslo.messaging
(the harness's ``fake:/`` transport), our scheduler-side state cache, and
our agent: inventory sources ``libvirt`` + ``simulated``, the Placement
reporter in ``annotate`` mode, the payload builder and the state cast.

The one seam: Nova's harness forbids importing ``libvirt`` inside a test
and gives nova-compute a fakelibvirt ``Connection``.  Our agent reads the
same host through the real libvirt-python and libvirt's *test driver*
instead: :func:`libvirt_test_xml` writes the fakelibvirt host's node
devices (PCI devices with their mdev types, and the mdevs nova-compute
created) into a ``test:///`` XML before each agent cycle, so both sides see
one host.  NVML facts, metrics and health come from the ``simulated``
source's YAML file.
"""
import collections
import os
import re
import time

import fixtures
# The harness poisons ``import libvirt`` (ImportModulePoisonFixture) during
# a test; our agent's libvirt source imports it lazily, so import it before.
import libvirt  # noqa: F401
from nova import conf as nova_conf
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.api import client as api_client
from nova.tests.functional.libvirt import test_vgpu
from oslo_config import cfg
import yaml

from gpu_nova_ext.agent import service
from gpu_nova_ext.agent import state_client
from gpu_nova_ext import conf as gconf
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import nova_conf as nova_conf_gen
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests import privsep_fixtures
from gpu_nova_ext_dev import libvirt_hosts

CONF = nova_conf.CONF

IMAGE = '155d900f-4e14-4e4c-a73d-069cbf4541e6'

# what gpu-nova-ext nova-conf enables, in its order
GPU_FILTERS = list(nova_conf_gen.GPU_FILTERS)

# A fakelibvirt host as both sides see it: gpu_nova_ext_dev.libvirt_hosts
PGPU0 = libvirt_hosts.PGPU0
PGPU1 = libvirt_hosts.PGPU1
A100 = libvirt_hosts.A100
L4 = libvirt_hosts.L4
IDLE = libvirt_hosts.IDLE
gpu = libvirt_hosts.gpu
libvirt_test_xml = libvirt_hosts.libvirt_test_xml

# [gpu_scheduler] state_ttl in the harness (s): longer than any test
HARNESS_STATE_TTL = 24 * 3600.0


def no_host_pci_sysfs(test) -> None:
    """As Nova's own PCI functional tests: read no host sysfs."""
    test.useFixture(fixtures.MockPatch(
        'nova.pci.utils.is_physical_function', return_value=False))
    test.useFixture(fixtures.MockPatch(
        'nova.pci.utils.get_function_by_ifname',
        return_value=(None, False)))


# how often an idle worker thread of the harness checks for shut-down (s)
IDLE_POLL_S = 0.1


class DeadlineWaitsMixin:
    """Nova's harness waits, bounded by the tests' deadline.

    Nova's helpers (``nova.tests.functional.integrated_helpers``,
    ``InstanceHelperMixin`` and ``PlacementInstanceHelperMixin``) poll a
    fixed number of times 0.5 s apart: a server has about 5 s to turn
    ACTIVE, too short on a busy machine.  Each method here polls the same
    public API calls until :data:`deadline.WAIT_S` and returns at the
    first poll that sees what it waits for.  The polls back off from
    0.05 s to Nova's 0.5 s: the API runs in the test's process, so polling
    it 20 times a second took CPU from the boot it waited for (the
    harness tests ran 17 % longer on a quiet machine; with the backoff
    they are as fast as with Nova's own waits).  Signatures are Nova's;
    ``max_retries`` and ``sleep`` are accepted and ignored.

    The harness's idle threads poll less, for the same reason: Nova's
    ``nova.test.TestCase.setUp`` makes every idle futurist worker thread
    wake 100 times a second (``ThreadWorker.MAX_IDLE_FOR = 0.01``, its
    work-around for futurist bug 2160159, whose cost is how long a pool
    takes to shut down), and a test here holds about a hundred of them.
    :data:`IDLE_POLL_S` keeps a pool's shut-down under a tenth of a
    second and the polling's CPU a tenth of Nova's (test_vgpu, paired
    runs on 2 cores: 8 to 10 % less CPU, 7 % less time).
    """

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.MonkeyPatch(
            'futurist._thread.ThreadWorker.MAX_IDLE_FOR', IDLE_POLL_S))

    def _until(self, fetch, done, failure):
        """Poll ``fetch()`` until ``done(value)``; that value.

        At the deadline the test fails with ``failure(last value)``.
        """
        last = []

        def attempt():
            last[:] = [fetch()]
            return last if done(last[0]) else None

        if not deadline.wait_for(attempt, backoff=True):
            self.fail('%s (waited %ss)' % (failure(last[0]),
                                           deadline.WAIT_S))
        return last[0]

    def _wait_for_service_parameter(self, service_hostname, service_binary,
                                    expected_params, max_retries=None,
                                    api=None):
        api = api or getattr(self, 'admin_api', self.api)
        return self._until(
            lambda: api.get_services(host=service_hostname,
                                     binary=service_binary)[0],
            lambda service: all(service[attr] == value for attr, value
                                in expected_params.items()),
            lambda service: 'Wait for service parameter change failed, '
            'expected_params=%s, service=%s' % (expected_params, service))

    def _wait_for_server_parameter(self, server, expected_params,
                                   max_retries=None, api=None,
                                   wait_for_fault_key=True):
        api = api or getattr(self, 'admin_api', self.api)
        # as Nova: ERROR is set before the fault is recorded; a test
        # waiting for ERROR waits for the fault too
        wait_for_fault = (wait_for_fault_key and
                          expected_params.get('status') == 'ERROR')

        def done(body):
            if all(body[attr] == value
                   for attr, value in expected_params.items()):
                return not wait_for_fault or 'fault' in body
            # no server leaves ERROR by itself: say so now, not at the
            # deadline
            return (body['status'] == 'ERROR' and
                    'status' in expected_params and 'fault' in body)

        body = self._until(
            lambda: api.get_server(server['id']), done,
            lambda body: 'Wait for state change failed, expected_params=%s,'
            ' server=%s, wait_for_fault=%s'
            % (expected_params, body, wait_for_fault))
        if not all(body[attr] == value
                   for attr, value in expected_params.items()):
            self.fail('Wait for state change failed: the server went to '
                      'ERROR, expected_params=%s, server=%s'
                      % (expected_params, body))
        return body

    def _wait_until_deleted(self, server):
        initially_in_error = server.get('status') == 'ERROR'

        def status():
            try:
                body = self.api.get_server(server['id'])
            except api_client.OpenStackApiNotFoundException:
                return None
            if not initially_in_error and body['status'] == 'ERROR':
                self.fail('Server %s went to error state instead of '
                          'disappearing.' % server['id'])
            return body['status']

        self._until(status, lambda value: value is None,
                    lambda value: 'Server %s failed to delete (status %s).'
                    % (server['id'], value))

    def _wait_for_instance_action_event(self, server, action_name,
                                        event_name, event_result):
        api = getattr(self, 'admin_api', self.api)
        seen = {'actions': [], 'events': []}

        def event():
            seen['actions'] = api.get_instance_actions(server['id'])
            # the API returns the newest action first
            for action in seen['actions']:
                if action['action'] != action_name:
                    continue
                seen['events'] = api.get_instance_action_details(
                    server['id'], action['request_id'])['events']
                for evt in seen['events']:
                    result = evt['result']
                    if (evt['event'] == event_name and result is not None
                            and result.lower() == event_result.lower()):
                        return evt
            return None

        return self._until(
            event, lambda evt: evt is not None,
            lambda evt: 'Timed out waiting for %s instance action event. '
            'Current instance actions: %s. Events in the last matching '
            'action: %s' % (event_name, seen['actions'], seen['events']))

    def _volume_attached(self, server_id, volume_id) -> bool:
        try:
            self.api.get_server_volume(server_id, volume_id)
            return True
        except api_client.OpenStackApiNotFoundException:
            return False

    def _wait_for_volume_attach(self, server_id, volume_id):
        self._until(
            lambda: self._volume_attached(server_id, volume_id), bool,
            lambda _: 'Timed out waiting for volume %s to be attached to '
            'server %s. Currently attached volumes: %s' % (
                volume_id, server_id,
                self.api.get_server_volumes(server_id)))

    def _wait_for_volume_detach(self, server_id, volume_id):
        self._until(
            lambda: self._volume_attached(server_id, volume_id),
            lambda attached: not attached,
            lambda _: 'Timed out waiting for volume %s to be detached from '
            'server %s. Currently attached volumes: %s' % (
                volume_id, server_id,
                self.api.get_server_volumes(server_id)))

    def _wait_for_migration_status(self, server, expected_statuses):
        api = getattr(self, 'admin_api', self.api)
        statuses = [status.lower() for status in expected_statuses]

        def migration():
            mine = [m for m in api.api_get('/os-migrations').body[
                'migrations'] if m['instance_uuid'] == server['id']]
            for mig in mine:
                if mig['status'].lower() in statuses:
                    return mig, mig['status']
            return None, mine[-1]['status'] if mine else None

        return self._until(
            migration, lambda found: found[0] is not None,
            lambda found: 'Timed out waiting for migration with status for '
            'instance %s (expected "%s", got "%s")'
            % (server['id'], expected_statuses, found[1]))[0]

    def _wait_for_log(self, log_line_regex):
        self._until(
            lambda: re.search(log_line_regex, self.stdlog.logger.output),
            bool, lambda _: 'The line "%s" did not appear in the log'
            % log_line_regex)

    def _wait_for_assert(self, assert_func, max_retries=None, sleep=None):
        return deadline.until_passes(assert_func, backoff=True)

    def _wait_for_server_allocations(self, consumer_id, max_retries=None):
        return self._until(
            lambda: self._get_allocations_by_server_uuid(consumer_id), bool,
            lambda _: 'Wait for server allocations failed, server=%s'
            % consumer_id)


class GpuSchedulerMixin(DeadlineWaitsMixin):
    """Our filters and weighers, enabled as an operator does in nova.conf."""

    # ServersTestBase appends these to [filter_scheduler] enabled_filters
    ADDITIONAL_FILTERS = GPU_FILTERS

    def _setup_scheduler_service(self):
        # HostManager loads filter and weigher classes once, when the
        # scheduler starts: configure them before.
        gconf.register_nova_opts(CONF)
        self.flags(available_filters=[
            'nova.scheduler.filters.all_filters',
            'gpu_nova_ext.scheduler.filters.all_filters'],
            weight_classes=[
            'nova.scheduler.weights.all_weighers',
            'gpu_nova_ext.scheduler.weighers.all_weighers'],
            group='filter_scheduler')
        # The harness's agents cast only when a test runs them (a real
        # agent casts every report_interval): a host's state must not age
        # out between two steps of a test, however slow the machine.
        self.flags(state_ttl=HARNESS_STATE_TTL, group='gpu_scheduler')
        # One state cache per nova-scheduler process: a fresh one per test.
        state_cache.reset_cache()
        self.addCleanup(state_cache.reset_cache)
        return super()._setup_scheduler_service()

    def boot(self, extra_specs: dict, expected_state: str = 'ACTIVE',
             host: str | None = None, **flavor_kw) -> dict:
        # small flavors: GPUs, not RAM/disk, decide in these scenarios
        for key, value in (('memory_mb', 512), ('vcpu', 1), ('disk', 1),
                           ('ephemeral', 0)):
            flavor_kw.setdefault(key, value)
        flavor = self._create_flavor(extra_spec=extra_specs, **flavor_kw)
        return self._create_server(
            image_uuid=IMAGE, flavor_id=flavor, networks='none',
            host=host, expected_state=expected_state)

    def gpu_of(self, server: dict) -> tuple:
        """(host, name of the GPU provider) of the server's allocation.

        The GPU provider is the one the allocation takes VGPU, PGPU or a
        CUSTOM_ resource class from (one per server in these tests).
        """
        allocs = self._get_allocations_by_server_uuid(server['id'])
        names = []
        for rp_uuid, alloc in allocs.items():
            if any(rc in ('VGPU', 'PGPU') or rc.startswith('CUSTOM_')
                   for rc in alloc['resources']):
                names.append(self.placement.get(
                    '/resource_providers/%s' % rp_uuid).body['name'])
        self.assertEqual(1, len(names), 'GPU providers of %s: %s (%s)'
                         % (server['id'], names, allocs))
        return server['OS-EXT-SRV-ATTR:host'], names[0]

    @staticmethod
    def pgpu(host: str, address: str) -> str:
        """Name Nova gives the libvirt pGPU provider of ``address``."""
        return '%s_pci_%s' % (host, address.replace(':', '_').replace(
            '.', '_'))


class GpuAgentMixin(DeadlineWaitsMixin):
    """Runs our agent for the harness's compute hosts.

    ``self.gpu_facts[host]`` is the host's simulated GPU YAML (PCI address
    -> facts, metrics, health); tests change it and call
    :meth:`run_agent` to run one agent cycle: discover (libvirt test
    driver mirroring the fakelibvirt host + simulated facts), report to
    the harness's Placement, cast the state to the scheduler's cache.
    """

    AGENT_MODE = 'annotate'

    # Nova's harness turns every RPC cast into a call by default
    # (CastAsCallFixture): keep casts real casts, as in production, so the
    # agent's state cast is asynchronous here too.
    CAST_AS_CALL = False

    def setUp(self):
        super().setUp()
        # the agent's MIG and power changes run in this process
        self.useFixture(privsep_fixtures.PrivsepFixture())
        # scenarios boot more servers than the default quota allows
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        self.gpu_facts = {}
        self.pci_infos = {}
        self.agent_nova_conf = {}
        self._agents = {}
        self._agent_dir = self.useFixture(fixtures.TempDir()).path

    def _agent_path(self, host, name):
        path = os.path.join(self._agent_dir, host)
        os.makedirs(path, exist_ok=True)
        return os.path.join(path, name)

    def _write_agent_files(self, host):
        if host in self.computes:
            conn = self.computes[host].driver._host.get_connection()
            xml = libvirt_test_xml(conn.pci_info, conn.mdev_info)
        else:
            # discovery before nova-compute starts (nova-conf generation)
            xml = libvirt_test_xml(self.pci_infos[host])
        with open(self._agent_path(host, 'libvirt.xml'), 'w') as f:
            f.write(xml)
        with open(self._agent_path(host, 'gpus.yaml'), 'w') as f:
            yaml.safe_dump(self.gpu_facts.get(host, {}), f)
        # the nova.conf the agent reads [devices]/[mdev_*] from: the same
        # as nova-compute's flags in this test
        lines = []
        for group, opts in self.agent_nova_conf.get(host, {}).items():
            lines.append('[%s]' % group)
            lines.extend('%s = %s' % kv for kv in opts.items())
        with open(self._agent_path(host, 'nova.conf'), 'w') as f:
            f.write('\n'.join(lines) + '\n')

    def agent_conf(self, host) -> cfg.ConfigOpts:
        """The host's gpu-nova-agent.conf, loaded as the daemon does."""
        path = self._agent_path(host, 'gpu-nova-agent.conf')
        with open(path, 'w') as f:
            f.write(AGENT_CONF % {
                'host': host,
                'mode': self.AGENT_MODE,
                'xml': self._agent_path(host, 'libvirt.xml'),
                'yaml': self._agent_path(host, 'gpus.yaml'),
                'nova_conf': self._agent_path(host, 'nova.conf'),
                'nova_conf_dir': self._agent_path(host, 'nova.conf.d'),
                'placement': self.placement.fixture.endpoint,
                'wait': deadline.WAIT_S,
            })
        conf = cfg.ConfigOpts()
        gconf.register_agent_opts(conf)
        conf(['--config-file', path], project='gpu-nova-agent',
             default_config_files=[])
        return conf

    def _agent(self, host):
        """The host's AgentService with a started state channel client.

        The client also listens for ``resend_gpu_state``: a scheduler
        cache that (re)starts gets this host's last state at once.
        """
        if host not in self._agents:
            conf = self.agent_conf(host)
            agent = service.AgentService(conf)
            agent.state_client = state_client.AgentStateClient(
                conf, on_resend=agent.cast_now)
            agent.state_client.start()
            self.addCleanup(agent.state_client.stop)
            self._agents[host] = agent
        return self._agents[host]

    def start_pci_in_placement_host(self, host: str, devices) -> tuple:
        """Start a host whose GPUs are passed through whole (PCI in Placement).

        Set up as an operator does: the agent discovers it, ``gpu-nova-ext
        nova-conf`` makes the ``[pci]`` drop-in (per-model resource class,
        our static traits as tags), nova-compute starts with it, the agent
        runs once.

        ``devices``: (product id, product name, simulated GPU facts) per
        slot of bus 0x81 (``0000:81:<slot>.0``).  Returns (drop-in, payload).
        """
        no_host_pci_sysfs(self)
        pci_info = fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0)
        facts = {}
        for slot, (product, name, gpu_facts) in enumerate(devices):
            pci_info.add_device(
                dev_type='PCI', bus=0x81, slot=slot, function=0,
                iommu_group=40 + slot, numa_node=0, vend_id='10de',
                vend_name='NVIDIA Corporation', prod_id=product,
                prod_name=name, driver_name='vfio-pci')
            facts['0000:81:%02x.0' % slot] = gpu_facts
        self.pci_infos[host] = pci_info
        self.gpu_facts[host] = facts
        self._write_agent_files(host)
        drop_in = nova_conf_gen.generate(
            manager.discover(self.agent_conf(host)))
        self.flags(group='pci', report_in_placement=True,
                   device_spec=drop_in.values('pci', 'device_spec'),
                   alias=drop_in.values('pci', 'alias'))
        self.flags(group='filter_scheduler', pci_in_placement=True)
        # passthrough device_specs carry no live_migratable tag, so an
        # older libvirt/QEMU host (the harness default) starts too
        self.start_compute(host, pci_info=pci_info)
        return drop_in, self.run_agent(host)

    def run_agent(self, host: str) -> dict:
        """One agent cycle for ``host``; returns the payload the cache got."""
        # a nova-scheduler process that already handled a request
        state_cache.get_cache().ensure_started(CONF)
        since = time.time()
        self._write_agent_files(host)
        self._agent(host).run_cycle()
        return self.wait_for_state(host, since)

    def wait_for_state(self, host: str, since: float) -> dict:
        cache = state_cache.get_cache()
        return self._until(
            lambda: cache.get(host),
            lambda payload: payload and payload['generated_at'] >= since,
            lambda payload: 'no GPU state for %s newer than %s reached the '
            'scheduler cache (last: %s)' % (
                host, since, payload and payload['generated_at']))


AGENT_CONF = """
[DEFAULT]
host = %(host)s
transport_url = fake:/

[agent]
mode = %(mode)s
inventory_sources = libvirt,simulated
libvirt_uri = test://%(xml)s
simulated_gpus_file = %(yaml)s
nova_config_file = %(nova_conf)s
nova_config_dir = %(nova_conf_dir)s
prometheus_port = 0
compute_node_wait_timeout = %(wait)d

[placement]
auth_type = admin_token
endpoint = %(placement)s
token = admin
max_request_retries = 0
retry_backoff = 0
"""


class GpuVGPUTestBase(GpuSchedulerMixin, GpuAgentMixin,
                      test_vgpu.VGPUTestBase):
    """Hosts with two mdev-capable pGPUs each (0000:81:00.0, :01.0)."""

    def start_gpu_host(self, host: str, gpus: dict,
                       multiple_gpu_types: bool = False,
                       mdev_types: dict | None = None) -> str:
        """Start nova-compute for ``host`` and run its agent once.

        :param gpus: simulated facts by PCI address (see :func:`gpu`)
        :param mdev_types: vGPU type per pGPU address, as an operator sets
            ``[devices] enabled_mdev_types`` + ``[mdev_<type>]
            device_addresses``; default: nvidia-11 on every pGPU.
        """
        nova_opts = self._mdev_flags(mdev_types)
        self.start_compute_with_vgpu(host, fakelibvirt.HostPCIDevicesInfo(
            num_pci=0, num_pfs=0, num_vfs=0, num_mdevcap=2,
            multiple_gpu_types=multiple_gpu_types))
        self.gpu_facts[host] = gpus
        self.agent_nova_conf[host] = nova_opts
        self.run_agent(host)
        return host

    def _mdev_flags(self, mdev_types):
        """Set nova-compute's vGPU type flags; return them for the agent."""
        if not mdev_types:
            self.flags(enabled_mdev_types=[fakelibvirt.NVIDIA_11_VGPU_TYPE],
                       group='devices')
            return {'devices': {
                'enabled_mdev_types': fakelibvirt.NVIDIA_11_VGPU_TYPE}}
        by_type = collections.defaultdict(list)
        for address, mtype in mdev_types.items():
            by_type[mtype].append(address)
        self.flags(enabled_mdev_types=sorted(by_type), group='devices')
        # nova registers the dynamic [mdev_*] groups when it reads them
        nova_conf.devices.register_dynamic_opts(CONF)
        opts = {'devices': {'enabled_mdev_types': ','.join(sorted(by_type))}}
        for mtype, addresses in by_type.items():
            self.flags(device_addresses=addresses, group='mdev_%s' % mtype)
            opts['mdev_%s' % mtype] = {
                'device_addresses': ','.join(addresses)}
        return opts
