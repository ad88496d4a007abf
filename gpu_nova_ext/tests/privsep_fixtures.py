# SPDX-License-Identifier: Apache-2.0

"""privsep in tests: oslo.privsep's own switches, no stand-in.

:class:`PrivsepFixture`: the entry points run in the test's process
(the context's client mode off, as Nova's ``PrivsepFixture``), so the
fake NVML and the fake sysfs of the test see the changes.  Every test that
makes the agent set MIG mode, a GPU instance or a power limit uses it;
without it the context would start ``sudo privsep-helper``.

:class:`ForkedPrivsepFixture`: a real privsep daemon, forked from the test
process and without capabilities (oslo.privsep's
``UnprivilegedPrivsepFixture``): calls, arguments, return values and
exceptions cross a real channel.  The daemon holds a copy of the test's
fake NVML: what it changes there, the test's copy does not see.
"""
import fixtures
from oslo_privsep.test import fixture as privsep_fixture

from gpu_nova_ext import privsep


class PrivsepFixture(fixtures.Fixture):
    """Run the privileged entry points in this process."""

    def _setUp(self):
        context = privsep.sys_admin_pctxt
        context.set_client_mode(False)
        self.addCleanup(context.set_client_mode, True)


class ForkedPrivsepFixture(fixtures.Fixture):
    """Run them in a forked, unprivileged privsep daemon."""

    def _setUp(self):
        self.useFixture(privsep_fixture.UnprivilegedPrivsepFixture(
            privsep.sys_admin_pctxt, {}))
