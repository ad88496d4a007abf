# SPDX-License-Identifier: Apache-2.0

"""The tests' one deadline: a passing wait costs no sleep, a failing one
ends at the deadline.  On a simulated clock (the deadline module's own
clock and sleep, never the time module that other threads in the test
process read), so no assertion is about wall time."""
import importlib

import fixtures
import testtools

from gpu_nova_ext.tests import deadline


class Clock:
    def __init__(self):
        self.now = 1000.0
        self.sleeps = []

    def monotonic(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


class TestDeadline(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.clock = Clock()
        self.simulate_clock()

    def simulate_clock(self):
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.tests.deadline.monotonic', self.clock.monotonic))
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext.tests.deadline.sleep', self.clock.sleep))

    def polls(self, values):
        """A predicate answering ``values`` in turn, then the last."""
        answers = list(values)
        self.calls = 0

        def predicate():
            self.calls += 1
            return answers.pop(0) if len(answers) > 1 else answers[0]
        return predicate

    @staticmethod
    def passes_on_try(n):
        """A check that fails its first ``n - 1`` calls, then passes."""
        tries = []

        def check():
            tries.append(1)
            if len(tries) < n:
                raise AssertionError('not yet')
            return 'done'
        return check

    def test_true_at_once_sleeps_not_at_all(self):
        self.assertEqual('up', deadline.wait_for(self.polls(['up'])))
        self.assertEqual([], self.clock.sleeps)

    def test_returns_one_poll_after_it_happened(self):
        result = deadline.wait_for(self.polls([None, 0, {'host': 1}]))
        self.assertEqual({'host': 1}, result)
        self.assertEqual(3, self.calls)
        self.assertEqual([deadline.POLL_S] * 2, self.clock.sleeps)

    def test_backoff_doubles_the_pause_up_to_its_cap(self):
        result = deadline.wait_for(self.polls([None] * 7 + ['up']),
                                   backoff=True)
        self.assertEqual('up', result)
        self.assertEqual([0.05, 0.1, 0.2, 0.4, 0.5, 0.5, 0.5],
                         [round(s, 6) for s in self.clock.sleeps])

    def test_backoff_still_ends_at_the_deadline(self):
        start = self.clock.now
        self.assertIsNone(deadline.wait_for(self.polls([None]),
                                            backoff=True))
        waited = self.clock.now - start
        self.assertGreaterEqual(waited, deadline.WAIT_S)
        self.assertLess(waited, deadline.WAIT_S + 2 * deadline.BACKOFF_MAX_S)

    def test_until_passes_backs_off_too(self):
        check = self.passes_on_try(4)
        self.assertEqual('done', deadline.until_passes(check, backoff=True))
        self.assertEqual([0.05, 0.1, 0.2],
                         [round(s, 6) for s in self.clock.sleeps])

    def test_gives_up_at_the_deadline_with_the_last_value(self):
        start = self.clock.now
        self.assertEqual([], deadline.wait_for(self.polls([[]])))
        waited = self.clock.now - start
        self.assertGreaterEqual(waited, deadline.WAIT_S)
        self.assertLess(waited, deadline.WAIT_S + 2 * deadline.POLL_S)

    def test_environment_sets_the_deadline(self):
        # registered first, so it runs after the variable is restored
        self.addCleanup(importlib.reload, deadline)
        self.useFixture(fixtures.EnvironmentVariable(
            'GPU_NOVA_EXT_TEST_WAIT_S', '7.5'))
        importlib.reload(deadline)
        self.simulate_clock()   # the reload put the real clock back
        self.assertEqual(7.5, deadline.WAIT_S)
        start = self.clock.now
        self.assertIsNone(deadline.wait_for(self.polls([None])))
        self.assertLess(self.clock.now - start, 7.5 + 2 * deadline.POLL_S)

    def test_until_passes_returns_once_the_check_passes(self):
        check = self.passes_on_try(3)
        self.assertEqual('done', deadline.until_passes(check))
        self.assertEqual(2, len(self.clock.sleeps))

    def test_until_passes_raises_the_last_assertion_at_the_deadline(self):
        count = []

        def check():
            count.append(1)
            raise AssertionError('try %d' % len(count))

        err = self.assertRaises(AssertionError, deadline.until_passes, check)
        self.assertEqual('try %d' % len(count), str(err))
        self.assertGreaterEqual(sum(self.clock.sleeps), deadline.WAIT_S)

    def test_other_errors_are_not_waited_out(self):
        def check():
            raise KeyError('boom')

        self.assertRaises(KeyError, deadline.until_passes, check)
        self.assertEqual([], self.clock.sleeps)
