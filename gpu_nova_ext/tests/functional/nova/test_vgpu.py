# SPDX-License-Identifier: Apache-2.0

"""vGPU scenarios through Nova's real API, conductor and scheduler.

Each boot asserts the host and the pGPU provider of the allocation.
"""
import time

import os_traits

from nova.tests.fixtures import libvirt as fakelibvirt

from gpu_nova_ext.tests.functional.nova import base

# vGPU types as NVML lists them for each model; fakelibvirt offers
# nvidia-11 (16 instances) and nvidia-12 (8) on every pGPU.
A100_TYPES = [
    {'id': fakelibvirt.NVIDIA_11_VGPU_TYPE, 'name': 'A100D-5C',
     'framebuffer_mib': 5120, 'max': 16},
    {'id': fakelibvirt.NVIDIA_12_VGPU_TYPE, 'name': 'A100D-10C',
     'framebuffer_mib': 10240, 'max': 8}]
L4_TYPES = [
    {'id': fakelibvirt.NVIDIA_11_VGPU_TYPE, 'name': 'L4-1B',
     'framebuffer_mib': 1024, 'max': 16},
    {'id': fakelibvirt.NVIDIA_12_VGPU_TYPE, 'name': 'L4-2B',
     'framebuffer_mib': 2048, 'max': 8}]

VGPU = {'resources:VGPU': '1'}


def a100(**kw):
    return base.gpu(base.A100, vgpu_types=A100_TYPES, **kw)


def l4(**kw):
    return base.gpu(base.L4, vgpu_types=L4_TYPES, **kw)


class MixedVGPUHostTest(base.GpuVGPUTestBase):
    """One host with two GPU models.

    An A100 on 0000:81:00.0 offering nvidia-12 (A100D-10C, 10 GiB) and an
    L4 on 0000:81:01.0 offering nvidia-11 (L4-1B, 1 GiB).
    """

    def setUp(self):
        super().setUp()
        self.start_gpu_host(
            'host1', {base.PGPU0: a100(), base.PGPU1: l4()},
            multiple_gpu_types=True,
            mdev_types={base.PGPU0: fakelibvirt.NVIDIA_12_VGPU_TYPE,
                        base.PGPU1: fakelibvirt.NVIDIA_11_VGPU_TYPE})
        self.a100_rp = self.pgpu('host1', base.PGPU0)
        self.l4_rp = self.pgpu('host1', base.PGPU1)

    def test_model_picks_pgpu(self):
        """Scenario 1: gpu:model picks the pGPU of that model."""
        for _ in range(2):
            server = self.boot(dict(VGPU, **{'gpu:model': 'L4'}))
            self.assertEqual(('host1', self.l4_rp), self.gpu_of(server))
            self.run_agent('host1')
        server = self.boot(dict(VGPU, **{'gpu:model': 'A100'}))
        self.assertEqual(('host1', self.a100_rp), self.gpu_of(server))
        # the full normalized model and a vendor constraint work too
        self.run_agent('host1')
        server = self.boot(dict(VGPU, **{'gpu:model': 'A100_80GB_PCIE',
                                         'gpu:vendor': 'nvidia'}))
        self.assertEqual(('host1', self.a100_rp), self.gpu_of(server))
        # no such model: no valid host
        self.boot(dict(VGPU, **{'gpu:model': 'H100'}),
                  expected_state='ERROR')

    def test_memory_min_picks_vgpu_type(self):
        """Scenario 2: gpu:memory_min selects by vGPU type framebuffer.

        It compares the offered vGPU type's framebuffer: 8 GiB only fits
        the A100's A100D-10C.
        """
        for spec in ('8GB', '8192', '10GiB'):
            server = self.boot(dict(VGPU, **{'gpu:memory_min': spec}))
            self.assertEqual(('host1', self.a100_rp), self.gpu_of(server),
                             spec)
            self.run_agent('host1')
        # 1 GiB fits both; spread puts it on the unused L4
        server = self.boot(dict(VGPU, **{'gpu:memory_min': '1GiB',
                                         'gpu:intra_host_policy': 'spread'}))
        self.assertEqual(('host1', self.l4_rp), self.gpu_of(server))
        self.boot(dict(VGPU, **{'gpu:memory_min': '16GiB'}),
                  expected_state='ERROR')

    def test_intra_host_pack_vs_spread(self):
        """Scenario 5: pack and spread choose different pGPUs."""
        first = self.boot(dict(VGPU, **{'gpu:model': 'A100'}))
        self.assertEqual(('host1', self.a100_rp), self.gpu_of(first))
        payload = self.run_agent('host1')
        a100_state = [g for g in payload['gpus']
                      if g['pci_address'] == base.PGPU0][0]
        self.assertEqual(7, [t for t in a100_state['vgpu_types']
                             if t['id'] == 'nvidia-12'][0]['available'])
        # [gpu_scheduler] intra_host_policy = pack (default): the A100,
        # already in use, over the idle L4
        packed = self.boot(VGPU)
        self.assertEqual(('host1', self.a100_rp), self.gpu_of(packed))
        self.run_agent('host1')
        packed = self.boot(dict(VGPU, **{'gpu:intra_host_policy': 'pack'}))
        self.assertEqual(('host1', self.a100_rp), self.gpu_of(packed))
        self.run_agent('host1')
        # the flavor asks to spread: the idle L4
        spread = self.boot(dict(VGPU, **{'gpu:intra_host_policy': 'spread'}))
        self.assertEqual(('host1', self.l4_rp), self.gpu_of(spread))
        # and the option does it for every flavor
        self.run_agent('host1')
        self.flags(intra_host_policy='spread', group='gpu_scheduler')
        spread = self.boot(VGPU)
        self.assertEqual(('host1', self.l4_rp), self.gpu_of(spread))

    def test_bad_gpu_spec_from_before_validation(self):
        """A flavor created before our validators ran: no valid host.

        The filters reject every host with one log line; the scheduler
        does not fail with an exception.
        """
        flavor = self._create_flavor(vcpu=1, memory_mb=512, disk=1,
                                     ephemeral=0, extra_spec=VGPU)
        self.admin_api.microversion = '2.85'  # no extra spec validation
        self.admin_api.post_extra_spec(
            flavor, {'extra_specs': {'gpu:memory_min': 'lots'}})
        self.admin_api.microversion = 'latest'
        server = self._create_server(
            image_uuid=base.IMAGE, flavor_id=flavor, networks='none',
            expected_state='ERROR')
        self.assertIn('No valid host', server['fault']['message'])
        self.assertIn("gpu:memory_min='lots'", self.stdlog.logger.output)

    def _traits(self):
        root = self.compute_rp_uuids['host1']
        a100 = self._get_provider_uuid_by_name(self.a100_rp)
        l4 = self._get_provider_uuid_by_name(self.l4_rp)
        return {name: set(self._get_provider_traits(rp))
                for name, rp in (('root', root), ('a100', a100), ('l4', l4))}

    def test_traits_survive_nova_updates(self):
        """Scenario 9: our traits survive Nova's updates.

        Our CUSTOM_GPU_ traits on the root and pGPU providers survive
        nova-compute's periodic update and provider cache refresh; Nova's
        own traits stay intact.
        """
        traits = self._traits()
        ours = {k: {t for t in v if t.startswith('CUSTOM_GPU_')}
                for k, v in traits.items()}
        nova_own = {k: v - ours[k] for k, v in traits.items()}
        self.assertIn('CUSTOM_GPU_HOST', ours['root'])
        self.assertTrue({'CUSTOM_GPU_VENDOR_NVIDIA',
                         'CUSTOM_GPU_MODEL_A100_80GB_PCIE',
                         'CUSTOM_GPU_MEMORY_80GB', 'CUSTOM_GPU_CUDA_CC_8_0',
                         'CUSTOM_GPU_DRIVER_550',
                         'CUSTOM_GPU_MODE_VGPU'} <= ours['a100'],
                        ours['a100'])
        self.assertTrue({'CUSTOM_GPU_MODEL_L4', 'CUSTOM_GPU_MEMORY_24GB',
                         'CUSTOM_GPU_CUDA_CC_8_9'} <= ours['l4'], ours['l4'])
        self.assertNotIn('CUSTOM_GPU_MODEL_L4', ours['a100'])
        # Nova's own traits are there and untouched by our agent
        self.assertIn(os_traits.OWNER_NOVA, nova_own['a100'])
        self.assertIn(os_traits.OWNER_NOVA, nova_own['l4'])
        self.assertTrue(any(t.startswith('COMPUTE_')
                            for t in nova_own['root']))

        # nova-compute re-reads Placement and runs its periodic update
        self.computes['host1'].manager.rt.reportclient.clear_provider_cache()
        self._run_periodics()
        self.assertEqual(traits, self._traits())
        # a second agent cycle changes nothing either
        self.run_agent('host1')
        self.assertEqual(traits, self._traits())
        # nor does a nova-compute restart (a new resource tracker)
        self.restart_compute_service('host1')
        self._run_periodics()
        self.assertEqual(traits, self._traits())

        # the model trait routes a granular request to its pGPU
        server = self.boot({'resources1:VGPU': '1',
                            'trait1:CUSTOM_GPU_MODEL_L4': 'required'})
        self.assertEqual(('host1', self.l4_rp), self.gpu_of(server))


class TwoVGPUHostsTest(base.GpuVGPUTestBase):
    """Two hosts with two A100s each, offering nvidia-11 (16 instances)."""

    def setUp(self):
        super().setUp()
        for host in ('host1', 'host2'):
            self.start_gpu_host(host, {base.PGPU0: a100(),
                                       base.PGPU1: a100()})

    def _boot_and_report(self, specs=VGPU, **kw):
        server = self.boot(specs, **kw)
        where = self.gpu_of(server)
        self.run_agent(where[0])
        return where

    def _set_health(self, host, address, state):
        self.gpu_facts[host][address]['health'] = state
        self.run_agent(host)

    def test_unhealthy_gpu_never_chosen(self):
        """Scenario 3: an unhealthy GPU is never chosen.

        A host with no healthy GPU left is skipped; recovery brings it
        back.
        """
        host, rp = self._boot_and_report()
        other_host = 'host2' if host == 'host1' else 'host1'
        used = rp
        free = (self.pgpu(host, base.PGPU1) if rp == self.pgpu(
            host, base.PGPU0) else self.pgpu(host, base.PGPU0))
        used_addr = base.PGPU0 if used.endswith('81_00_0') else base.PGPU1
        free_addr = base.PGPU1 if used_addr == base.PGPU0 else base.PGPU0
        # binpack and pack would pick the used pGPU again ...
        self.assertEqual((host, used), self._boot_and_report())
        # ... until it turns unhealthy
        self._set_health(host, used_addr, 'unhealthy')
        for _ in range(2):
            self.assertEqual((host, free), self._boot_and_report())
        # degraded is usable by default, but not preferred
        self._set_health(host, free_addr, 'unhealthy')
        # no healthy GPU left on the host: the other host gets it
        where = self._boot_and_report()
        self.assertEqual(other_host, where[0])
        # gpu:health=any takes the unhealthy ones again (forced host)
        self.assertEqual(host, self._boot_and_report(
            dict(VGPU, **{'gpu:health': 'any'}), host=host)[0])
        # recovery: binpack prefers the busier host again
        self._set_health(host, used_addr, 'healthy')
        self._set_health(host, free_addr, 'healthy')
        self.assertEqual(host, self._boot_and_report()[0])

    def _wait_for_scheduler_aggregate(self, agg_id, hosts, key):
        """Until nova-scheduler got the aggregate (nova-api casts it)."""
        host_manager = self.scheduler.manager.host_manager
        self._until(
            lambda: host_manager.aggs_by_id.get(agg_id),
            lambda agg: agg and key in agg.metadata and hosts <= set(
                agg.hosts),
            lambda agg: 'nova-scheduler did not get aggregate %s with %s '
            'and hosts %s (has %s)' % (agg_id, key, sorted(hosts), agg))

    def test_packing_multiplier(self):
        """Scenario 4: packing multiplier, option and aggregate.

        A negative multiplier fills one host first, a positive one spreads,
        an aggregate's metadata overrides the option.
        """
        # default multiplier -10: binpack
        first, _ = self._boot_and_report()
        for _ in range(2):
            self.assertEqual(first, self._boot_and_report()[0])
        second = 'host2' if first == 'host1' else 'host1'
        # positive: spread to the emptier host
        self.flags(packing_weight_multiplier=10.0, group='gpu_weights')
        self.assertEqual(second, self._boot_and_report()[0])
        self.assertEqual(second, self._boot_and_report()[0])
        self.assertEqual(second, self._boot_and_report()[0])
        # host1 and host2 now hold 3 servers each; spread alternates
        third = self._boot_and_report()[0]
        self.assertNotEqual(third, self._boot_and_report()[0])
        # an aggregate's metadata overrides the option: binpack again
        agg = self.admin_api.post_aggregate({'aggregate': {'name': 'gpu'}})
        for host in ('host1', 'host2'):
            self.admin_api.add_host_to_aggregate(agg['id'], host)
        self.admin_api.post_aggregate_action(agg['id'], {'set_metadata': {
            'metadata': {'packing_weight_multiplier': '-10.0'}}})
        self._wait_for_scheduler_aggregate(
            agg['id'], {'host1', 'host2'}, 'packing_weight_multiplier')
        fourth = self._boot_and_report()[0]
        for _ in range(2):
            self.assertEqual(fourth, self._boot_and_report()[0])

    def test_non_gpu_flavor_avoids_gpu_hosts(self):
        """Scenario 6: a non-GPU flavor avoids hosts with idle GPUs.

        It lands on the host without GPUs while that host can take it.
        """
        self.start_compute('cpu1')
        for _ in range(2):
            server = self.boot({})
            self.assertEqual('cpu1', server['OS-EXT-SRV-ATTR:host'])
            self.assertEqual(
                {self.compute_rp_uuids['cpu1']},
                set(self._get_allocations_by_server_uuid(server['id'])))
        # cpu1 disabled: the GPU hosts still take non-GPU servers
        service = self.admin_api.get_services(
            binary='nova-compute', host='cpu1')[0]
        self.admin_api.put_service(service['id'], {'status': 'disabled'})
        server = self.boot({})
        self.assertIn(server['OS-EXT-SRV-ATTR:host'], ('host1', 'host2'))

    def test_metrics_steer_between_idle_hosts(self):
        """Metrics cast by the agents decide between equally empty hosts.

        host1's GPUs run hot and busy (load Nova does not know about),
        host2's are cool and idle: the utilization and thermal weighers
        send the server to host2; when host2 heats up instead, to host1.
        """
        busy = dict(base.IDLE, utilization_pct=95.0, temperature_c=84)
        for address in (base.PGPU0, base.PGPU1):
            self.gpu_facts['host1'][address]['metrics'] = dict(busy)
        self.run_agent('host1')
        host, _ = self._boot_and_report()
        self.assertEqual('host2', host)
        # host2 now runs hot and busy, host1 idle; binpacking (which
        # prefers host2, holding the first server) is off for this one
        for address in (base.PGPU0, base.PGPU1):
            self.gpu_facts['host1'][address]['metrics'] = dict(base.IDLE)
            self.gpu_facts['host2'][address]['metrics'] = dict(busy)
        self.flags(packing_weight_multiplier=0.0, group='gpu_weights')
        self.run_agent('host1')
        self.run_agent('host2')
        host, _ = self._boot_and_report()
        self.assertEqual('host1', host)

    def _restart_scheduler_cache(self):
        """A new nova-scheduler process: an empty cache, no listener."""
        base.state_cache.reset_cache()
        self.assertIsNone(base.state_cache.get_cache().get('host1'))

    def test_scheduler_restart_gets_state_by_resend(self):
        """The state channel: a restarted scheduler asks, agents answer.

        No agent cycle runs here: the state comes from the agents' answer
        to the ``resend_gpu_state`` fanout the starting listener casts.
        """
        self._restart_scheduler_cache()
        since = time.time() - 3600
        base.state_cache.get_cache().ensure_started(base.CONF)
        for host in ('host1', 'host2'):
            payload = self.wait_for_state(host, since)
            self.assertEqual(2, len(payload['gpus']))
        host, _ = self._boot_and_report(dict(VGPU, **{'gpu:model': 'A100'}))
        self.assertIn(host, ('host1', 'host2'))

    def test_first_gpu_request_after_scheduler_restart(self):
        """The first GPU request of a new scheduler process finds state.

        Its listener starts with that request; [gpu_scheduler]
        startup_state_wait lets the agents' answers to the listener's
        resend arrive before the hosts are judged, so a request with a
        hard GPU constraint does not meet missing_state_policy=fail.
        """
        self._restart_scheduler_cache()
        host, rp = self._boot_and_report(
            dict(VGPU, **{'gpu:model': 'A100', 'gpu:memory_min': '4GB'}))
        self.assertIn(host, ('host1', 'host2'))
        self.assertIn(rp, (self.pgpu(host, base.PGPU0),
                           self.pgpu(host, base.PGPU1)))


class MultiCreateTest(base.GpuVGPUTestBase):
    """One request for several servers on a host with two A100s.

    Each A100 offers nvidia-12 (8 instances).  Nova claims a host's first
    allocation candidate for every server of a request, and Placement's
    candidates are those of the request's start: the GPU chosen inside
    the host must count what the request's earlier servers took.
    """

    def setUp(self):
        super().setUp()
        # room on the host's CPUs for more servers than one GPU takes
        self.flags(cpu_allocation_ratio=16.0)
        self.start_gpu_host(
            'host1', {base.PGPU0: a100(), base.PGPU1: a100()},
            multiple_gpu_types=True,
            mdev_types={base.PGPU0: fakelibvirt.NVIDIA_12_VGPU_TYPE,
                        base.PGPU1: fakelibvirt.NVIDIA_12_VGPU_TYPE})

    def _multi_create(self, count: int, extra_specs: dict) -> list:
        flavor = self._create_flavor(
            extra_spec=extra_specs, memory_mb=512, vcpu=1, disk=1,
            ephemeral=0)
        body = self._build_server(image_uuid=base.IMAGE, flavor_id=flavor,
                                  networks='none')
        body.update(min_count=count, max_count=count)
        self.api.post_server({'server': body})
        servers = self.api.get_servers(detail=True)
        self.assertEqual(count, len(servers))
        return [self._wait_for_state_change(s, 'ACTIVE') for s in servers]

    def _gpus(self, servers) -> dict:
        used: dict = {}
        for server in servers:
            _, rp = self.gpu_of(server)
            used[rp] = used.get(rp, 0) + 1
        return used

    def test_more_servers_than_one_gpu_holds_pack(self):
        # pack fills one A100 (8), then the other takes the ninth
        servers = self._multi_create(9, VGPU)
        self.assertEqual(
            [1, 8], sorted(self._gpus(servers).values()))

    def test_spread_alternates_within_the_request(self):
        servers = self._multi_create(
            4, dict(VGPU, **{'gpu:intra_host_policy': 'spread'}))
        self.assertEqual(
            {self.pgpu('host1', base.PGPU0): 2,
             self.pgpu('host1', base.PGPU1): 2}, self._gpus(servers))
