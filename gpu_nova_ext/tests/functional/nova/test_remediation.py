# SPDX-License-Identifier: Apache-2.0

"""Remediation in Nova's harness: servers leave an unhealthy GPU.

vGPU servers live-migrate between two hosts (fakelibvirt versions that
support it, as Nova's own vGPU live-migration tests), passthrough servers
cold-migrate; the agent's health decides where Nova's scheduler (with our
filters) puts them.
"""
import os
import sys
import threading
import time

import fixtures
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import base as libvirt_base
import oslo_messaging
from testtools import content

from gpu_nova_ext.agent import notifications
from gpu_nova_ext import exception
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.operator import audit
from gpu_nova_ext.operator import notifications as rnotify
from gpu_nova_ext.operator import nova_conf as nova_conf_gen
from gpu_nova_ext.operator import remediate_daemon
from gpu_nova_ext.operator import remediation_policy as policy
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests import deadline
from gpu_nova_ext.tests.functional.nova import base
from gpu_nova_ext.tests.functional.nova import ops_base

VGPU = {'resources:VGPU': '1'}
OPT_OUT = {policy.OPT_OUT_KEY: policy.OPT_OUT_VALUE}
XID79 = 'XID 79: GPU has fallen off the bus'


def a100(**kw):
    return base.gpu(base.A100, vgpu_types=[
        {'id': 'nvidia-11', 'name': 'A100D-5C', 'framebuffer_mib': 5120,
         'max': 16}], **kw)


class VGPURemediationTest(ops_base.LiveMigrationVGPUTestBase):
    """src: pGPU0 healthy, pGPU1 unhealthy; dest: two healthy pGPUs."""

    def setUp(self):
        super().setUp()
        self.start_gpu_host('src', {base.PGPU0: a100(),
                                    base.PGPU1: a100(health='unhealthy')})
        self.start_gpu_host('dest', {base.PGPU0: a100(), base.PGPU1: a100()})
        self.src_gpu = self.pgpu('src', base.PGPU0)

    def boot_on_src(self):
        server = self.boot(VGPU, host='src')
        self.assertEqual(('src', self.src_gpu), self.gpu_of(server))
        self.run_agent('src')
        return server

    def fail_src_gpu(self):
        self.gpu_facts['src'][base.PGPU0]['health'] = 'unhealthy'
        self.run_agent('src')

    def trigger(self):
        return policy.Trigger(host='src', gpu=base.PGPU0, reason=XID79)

    def test_live_migrates_leaves_opted_out_within_limit(self):
        moved = [self.boot_on_src()['id'] for _ in range(2)]
        kept = self.boot_on_src()['id']
        self.set_metadata(kept, OPT_OUT)
        self.fail_src_gpu()
        # one at a time cloud-wide, though two per host would be allowed
        remediator = self.remediator(self.ops_conf(
            max_concurrent=1, max_concurrent_per_host=2))
        results = {r.decision.server: r for r in remediator.run(
            self.trigger())}
        for server in moved:
            self.assertEqual(('moved', 'dest', policy.LIVE), (
                results[server].outcome, results[server].destination,
                results[server].decision.action))
            body = self.api.get_server(server)
            self.assertEqual(('dest', 'ACTIVE'), (
                body['OS-EXT-SRV-ATTR:host'], body['status']))
            self.assertEqual('dest', self.gpu_of(body)[0])
        self.assertEqual('skipped', results[kept].outcome)
        self.assertIn('remediation=never', results[kept].decision.reason)
        self.assertEqual(('src', self.src_gpu),
                         self.gpu_of(self.api.get_server(kept)))
        self.assertEqual(1, remediator.peak_in_flight)
        sent = [(e, p['server'], p['outcome'])
                for e, p in remediator.notifier.sent]
        for server in moved:
            self.assertIn((rnotify.START, server, 'started'), sent)
            self.assertIn((rnotify.END, server, 'moved'), sent)
        self.assertIn((rnotify.END, kept, 'skipped'), sent)

    def test_moves_in_parallel_up_to_the_limits(self):
        servers = [self.boot_on_src()['id'] for _ in range(2)]
        self.fail_src_gpu()
        remediator = self.remediator(self.ops_conf(
            max_concurrent=2, max_concurrent_per_host=2))
        results = remediator.run(self.trigger())
        self.assertEqual(set(servers), {r.decision.server for r in results
                                        if r.outcome == 'moved'})
        # both at once (the other test: one at a time under a limit of 1)
        self.assertEqual(2, remediator.peak_in_flight)
        self.assertEqual(['dest'] * 2,
                         [self.server_host(s) for s in servers])

    def test_dry_run_moves_nothing(self):
        server = self.boot_on_src()['id']
        self.fail_src_gpu()
        remediator = self.remediator(self.ops_conf(enabled=False))
        [result] = remediator.run(self.trigger())
        self.assertEqual('would-live-migrate', result.outcome)
        self.assertEqual('src', self.server_host(server))
        self.assertIn('dry run: would live-migrate %s' % server,
                      '\n'.join(self.lines))
        self.assertEqual([rnotify.END],
                         [e for e, _ in remediator.notifier.sent])
        self.assertTrue(remediator.notifier.sent[0][1]['dry_run'])

    def test_refused_migration_reported_and_exit_2(self):
        # no healthy GPU anywhere else: Nova finds no host, live or cold
        for address in (base.PGPU0, base.PGPU1):
            self.gpu_facts['dest'][address]['health'] = 'unhealthy'
        self.run_agent('dest')
        server = self.boot_on_src()['id']
        self.fail_src_gpu()
        exc = self.assertRaises(
            exception.GpuNovaExtException, self.cli, self.ops_conf(),
            'remediate', '--once', '--host', 'src', '--gpu', base.PGPU0)
        self.assertIn('1 of 1 server(s) of remediation could not be moved',
                      str(exc))
        out = self.stdout
        # live first (refused), then cold (refused too), each reported
        self.assertIn('Nova refused to live-migrate server %s' % server, out)
        self.assertIn('FAILED cold-migrate %s' % server, out)
        self.assertIn('status error) and the server is still on src', out)
        self.assertEqual('src', self.server_host(server))
        self.assertEqual('ACTIVE', self.api.get_server(server)['status'])
        # with a retry: live, cold, cold again, then one error and done
        remediator = self.remediator(self.ops_conf(max_retries=1))
        [result] = remediator.run(self.trigger())
        self.assertEqual(('failed', 3, policy.COLD), (
            result.outcome, result.attempts, result.decision.action))
        self.assertEqual([rnotify.START, rnotify.ERROR],
                         [e for e, _ in remediator.notifier.sent])

    def test_vanished_server_and_unknown_host(self):
        server = self.boot_on_src()
        self.fail_src_gpu()
        remediator = self.remediator(self.ops_conf())
        decisions = remediator.plan(self.trigger())
        self.assertEqual([policy.LIVE], [d.action for d in decisions])
        self._delete_server(server)
        [result] = remediator.execute(self.trigger(), decisions)
        self.assertEqual('failed', result.outcome)
        self.assertIn('%s no longer exists' % server['id'], result.error)
        self.assertEqual(rnotify.ERROR, remediator.notifier.sent[-1][0])
        exc = self.assertRaises(
            exception.UnknownHost, remediator.plan,
            policy.Trigger(host='nosuch', gpu=base.PGPU0, reason='x'))
        self.assertIn("No host 'nosuch'", str(exc))

    def test_once_sweep_from_the_schedulers_state(self):
        """--once without --host: no notification, a sweep.

        The GPUs the scheduler cache knows as unhealthy (what ``audit
        --state-wait`` hears) are remediated.
        """
        server = self.boot_on_src()['id']
        self.fail_src_gpu()
        cache = state_cache.get_cache()

        def sweep(conf, placement):
            states = {h: cache.get(h) for h in cache.hosts()}
            return remediate_daemon.triggers_from_audit(audit.build_report(
                audit.collect(placement), states))

        rc, out = self.cli(self.ops_conf(), 'remediate', '--once',
                           sweep=sweep)
        self.assertEqual(0, rc)
        # both unhealthy GPUs of src: the empty one said, the server moved
        self.assertIn('src: no server on GPU %s' % base.PGPU1, out)
        self.assertIn('moved %s' % server, out)
        self.assertEqual('dest', self.server_host(server))

    def test_mttr_health_notification_to_active(self):
        """Agent health -> gpu.health.update -> daemon -> ACTIVE elsewhere.

        Reports the time from the health change to ACTIVE (not asserted).
        """
        server = self.boot_on_src()['id']
        conf = self.ops_conf(sweep_interval=0)
        daemon = remediate_daemon.RemediationDaemon(conf,
                                                    self.remediator(conf))
        daemon.start_listener()
        self.addCleanup(daemon.stop)
        threading.Thread(target=daemon.run, daemon=True).start()

        agent_conf = self.agent_conf('src')
        # registers [oslo_messaging_notifications] on the agent's conf
        oslo_messaging.get_notification_transport(agent_conf)
        agent_conf.set_override('driver', ['messagingv2'],
                                group='oslo_messaging_notifications')
        started = time.monotonic()
        self.fail_src_gpu()
        notifier = notifications.HealthNotifier(agent_conf, 'src')
        self.addCleanup(notifier.stop)
        notifier.send(
            notifications.build_payload(
                'src', base.PGPU0, None, base.A100['name'], 'healthy',
                'unhealthy', [], [XID79]))
        self.assertTrue(deadline.wait_for(lambda: daemon.results),
                        'the daemon remediated nothing')
        mttr = time.monotonic() - started
        [result] = daemon.results
        self.assertEqual(('moved', 'dest'),
                         (result.outcome, result.destination))
        body = self.api.get_server(server)
        self.assertEqual(('dest', 'ACTIVE'), (
            body['OS-EXT-SRV-ATTR:host'], body['status']))
        self.assertEqual(XID79 + '; vgpu server, status ACTIVE',
                         daemon.remediator.notifier.sent[-1][1]['reason'])
        line = ('MTTR (agent health change -> gpu.health.update -> ACTIVE '
                'on another host, live migration): %.2fs' % mttr)
        self.addDetail('mttr', content.text_content(line))
        if os.environ.get('MTTR_REPORT'):
            sys.__stderr__.write(line + '\n')


class PassthroughRemediationTest(ops_base.OpsMixin, base.GpuSchedulerMixin,
                                 base.GpuAgentMixin,
                                 libvirt_base.ServersTestBase):
    """Two hosts with one A100 each, passed through (PCI in Placement).

    nova.conf comes from our generator, as in the PCI scenario; the
    device_spec carries no live_migratable tag, so servers cold-migrate.
    """

    microversion = 'latest'
    ADMIN_API = True
    ADDITIONAL_FILTERS = ['PciPassthroughFilter'] + base.GPU_FILTERS
    HOSTS = ('pt1', 'pt2')

    def setUp(self):
        super().setUp()
        base.no_host_pci_sysfs(self)
        # as Nova's cold-migration tests: no instance disks to move
        self.useFixture(fixtures.MockPatch(
            'nova.virt.libvirt.LibvirtDriver._get_instance_disk_info',
            return_value=[]))
        self.useFixture(fixtures.MockPatch('os.rename'))
        for host in self.HOSTS:
            pci_info = fakelibvirt.HostPCIDevicesInfo(
                num_pci=0, num_pfs=0, num_vfs=0)
            pci_info.add_device(
                dev_type='PCI', bus=0x81, slot=0, function=0,
                iommu_group=40, numa_node=0, vend_id='10de',
                vend_name='NVIDIA Corporation', prod_id='20b5',
                prod_name='GA100 [A100 PCIe 80GB]', driver_name='vfio-pci')
            self.pci_infos[host] = pci_info
            self.gpu_facts[host] = {base.PGPU0: base.gpu(base.A100)}
        self._write_agent_files('pt1')
        drop_in = nova_conf_gen.generate(
            manager.discover(self.agent_conf('pt1')))
        self.flags(group='pci', report_in_placement=True,
                   device_spec=drop_in.values('pci', 'device_spec'),
                   alias=drop_in.values('pci', 'alias'))
        self.flags(group='filter_scheduler', pci_in_placement=True)
        for host in self.HOSTS:
            self.start_compute(host, pci_info=self.pci_infos[host])
            self.run_agent(host)

    def test_cold_migrates_passthrough_server(self):
        server = self.boot({'pci_passthrough:alias': 'gpu-a100-80gb-pcie:1'},
                           host='pt1')
        self.assertEqual(('pt1', 'pt1_%s' % base.PGPU0.upper()),
                         self.gpu_of(server))
        self.gpu_facts['pt1'][base.PGPU0]['health'] = 'unhealthy'
        self.run_agent('pt1')
        remediator = self.remediator(self.ops_conf())
        [result] = remediator.run(policy.Trigger(
            host='pt1', gpu=base.PGPU0, reason=XID79))
        self.assertEqual(('moved', 'pt2', policy.COLD), (
            result.outcome, result.destination, result.decision.action))
        self.assertIn('passthrough server without live-migratable GPUs',
                      result.decision.reason)
        body = self.api.get_server(server['id'])
        # the controller confirmed the resize: ACTIVE, on pt2's A100
        self.assertEqual('ACTIVE', body['status'])
        self.assertEqual(('pt2', 'pt2_%s' % base.PGPU0.upper()),
                         self.gpu_of(body))

    def test_compute_down_evacuates_only_with_evacuate_policy(self):
        server = self.boot({'pci_passthrough:alias': 'gpu-a100-80gb-pcie:1'},
                           host='pt1')
        self.gpu_facts['pt1'][base.PGPU0]['health'] = 'unhealthy'
        self.run_agent('pt1')
        self.computes['pt1'].stop()
        [svc] = self.admin_api.get_services(binary='nova-compute',
                                            host='pt1')
        self.admin_api.put_service_force_down(svc['id'], True)
        trigger = policy.Trigger(host='pt1', gpu=base.PGPU0, reason=XID79)
        [result] = self.remediator(self.ops_conf()).run(trigger)
        self.assertEqual('skipped', result.outcome)
        self.assertIn('policy = evacuate', result.decision.reason)
        [result] = self.remediator(
            self.ops_conf(policy='evacuate')).run(trigger)
        self.assertEqual(('moved', 'pt2', policy.EVACUATE), (
            result.outcome, result.destination, result.decision.action))
        body = self.api.get_server(server['id'])
        # Nova (2.95+) leaves an evacuated server stopped until the
        # operator knows the failed host is fenced
        self.assertEqual(('pt2', 'SHUTOFF'),
                         (body['OS-EXT-SRV-ATTR:host'], body['status']))
        pt2_gpu = self._get_provider_uuid_by_name('pt2_%s'
                                                  % base.PGPU0.upper())
        self.assertIn(pt2_gpu, self._get_allocations_by_server_uuid(
            server['id']))
        # Nova keeps the allocation on pt1 until its nova-compute comes
        # back: a second look leaves the server alone
        [again] = self.remediator(
            self.ops_conf(policy='evacuate')).run(trigger)
        self.assertEqual('skipped', again.outcome)
        self.assertIn('runs on pt2 already', again.decision.reason)
