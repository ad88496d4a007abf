# SPDX-License-Identifier: Apache-2.0

"""Test base for the scheduler plugins: nova.conf.CONF, a fresh state cache
with a test clock, and Nova's own filter/weight handlers.
"""
import logging

import fixtures
from oslo_config import fixture as config_fixture
from oslotest import base

from gpu_nova_ext.agent import payload as agent_payload
from gpu_nova_ext.scheduler import context as sched_context
from gpu_nova_ext.state import cache as state_cache
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

CONF = sched_context.CONF


class PluginTestCase(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.flags = self.useFixture(config_fixture.Config(CONF)).config
        self.flags(state_listener=False, group='gpu_scheduler')
        state_cache.reset_cache()
        self.addCleanup(state_cache.reset_cache)
        self.now = 1000.0
        self.cache = state_cache.get_cache()
        self.cache.clock = lambda: self.now
        self.cache.configure(CONF)
        self.log = self.useFixture(fixtures.FakeLogger(
            name='gpu_nova_ext', level=logging.DEBUG))

    def add_host(self, host, gpus, generated_at=None):
        """The host's agent casts its facts and metrics."""
        state = no.payload(host, gpus, generated_at=self.now
                           if generated_at is None else generated_at)
        for message in agent_payload.Publisher().messages(state):
            self.assertTrue(self.cache.update(message))

    def log_lines(self, text):
        return [line for line in self.log.output.splitlines()
                if text in line]
