# SPDX-License-Identifier: Apache-2.0

"""The remediation decisions: a pure function of plain records."""
import collections

import testtools

from gpu_nova_ext.operator import remediation_policy as policy

TRIGGER = policy.Trigger(host='cmp-1', gpu='0000:3b:00.0', reason='XID 79')


def server(sid, kind=policy.KIND_VGPU, status='ACTIVE', **kw):
    return policy.ServerFacts(id=sid, host='cmp-1', gpu='0000:3b:00.0',
                              kind=kind, name='vm-' + sid, status=status,
                              **kw)


def actions(servers, policy_name='migrate', compute_up=True, **kw):
    return [(d.server, d.action) for d in policy.decide(
        TRIGGER, servers, policy_name, compute_up, **kw)]


class TestDecide(testtools.TestCase):

    def test_vgpu_live_passthrough_cold(self):
        self.assertEqual(
            [('a', policy.LIVE), ('b', policy.COLD), ('c', policy.COLD)],
            actions([server('b', policy.KIND_PASSTHROUGH),
                     server('a'),
                     server('c', status='SHUTOFF')]))

    def test_passthrough_live_when_configured(self):
        self.assertEqual(
            [('a', policy.LIVE)],
            actions([server('a', policy.KIND_PASSTHROUGH)],
                    passthrough_live=True))

    def test_live_falls_back_to_cold_only_when_active(self):
        [active, paused] = policy.decide(
            TRIGGER, [server('a'), server('b', status='PAUSED')], 'migrate',
            True)
        self.assertEqual(policy.COLD, active.fallback)
        self.assertIsNone(paused.fallback)
        self.assertEqual(policy.LIVE, paused.action)

    def test_opted_out_left_alone_whatever_the_policy(self):
        opted = server('a', metadata={policy.OPT_OUT_KEY: 'never'})
        for name in ('notify', 'migrate', 'evacuate'):
            [d] = policy.decide(TRIGGER, [opted], name, False)
            self.assertEqual(policy.SKIP, d.action)
            self.assertIn('gpu_nova_ext:remediation=never', d.reason)
        # any other value is no opt-out
        other = server('b', metadata={policy.OPT_OUT_KEY: 'always'})
        self.assertEqual([('b', policy.LIVE)], actions([other]))

    def test_server_already_elsewhere_left_alone(self):
        [d] = policy.decide(TRIGGER, [server('a', running_on='cmp-2')],
                            'evacuate', False)
        self.assertEqual(policy.SKIP, d.action)
        self.assertIn('runs on cmp-2 already', d.reason)
        self.assertEqual([('b', policy.LIVE)],
                         actions([server('b', running_on='cmp-1')]))

    def test_notify_policy_moves_nothing(self):
        self.assertEqual([('a', policy.NOTIFY)],
                         actions([server('a')], 'notify'))

    def test_compute_down_evacuates_only_with_evacuate(self):
        [d] = policy.decide(TRIGGER, [server('a')], 'migrate', False)
        self.assertEqual(policy.SKIP, d.action)
        self.assertIn('policy = evacuate', d.reason)
        self.assertEqual(
            [('a', policy.EVACUATE), ('b', policy.SKIP)],
            actions([server('a', status='ERROR'),
                     server('b', status='SHELVED_OFFLOADED')],
                    'evacuate', compute_up=False))

    def test_busy_unknown_and_unmovable(self):
        decisions = policy.decide(TRIGGER, [
            server('a', task_state='migrating'),
            policy.ServerFacts(id='b', host='cmp-1', gpu=None,
                               kind=policy.KIND_VGPU, exists=False),
            server('c', status='ERROR')], 'migrate', True)
        self.assertEqual([policy.SKIP] * 3, [d.action for d in decisions])
        self.assertIn('task state migrating', decisions[0].reason)
        self.assertIn('no server Nova knows', decisions[1].reason)
        self.assertIn('status ERROR', decisions[2].reason)
        self.assertFalse(any(d.moves for d in decisions))


def decision(sid, host):
    return policy.Decision(server=sid, host=host, gpu=None,
                           action=policy.LIVE, reason='')


class TestNextBatch(testtools.TestCase):

    def test_limits_per_host_and_total(self):
        pending = [decision('a', 'h1'), decision('b', 'h1'),
                   decision('c', 'h2'), decision('d', 'h3')]
        batch = policy.next_batch(pending, collections.Counter(), 2, 1)
        self.assertEqual(['a', 'c'], [d.server for d in batch])
        batch = policy.next_batch(pending, collections.Counter(), 4, 2)
        self.assertEqual(['a', 'b', 'c', 'd'], [d.server for d in batch])

    def test_counts_moves_in_flight(self):
        pending = [decision('a', 'h1'), decision('b', 'h2')]
        self.assertEqual(
            ['b'], [d.server for d in policy.next_batch(
                pending, collections.Counter(h1=1), 2, 1)])
        self.assertEqual([], policy.next_batch(
            pending, collections.Counter(h3=2), 2, 1))

    def test_retry_delays_double(self):
        self.assertEqual([30.0, 60.0, 120.0], policy.retry_delays(3, 30.0))
        self.assertEqual([], policy.retry_delays(0, 30.0))
