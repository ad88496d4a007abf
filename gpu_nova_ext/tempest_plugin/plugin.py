# SPDX-License-Identifier: Apache-2.0

"""The Tempest plugin: where the tests are, and their options.

Loaded by Tempest (entry point ``tempest.test_plugins``,
``gpu-nova-ext``); ``tempest list-plugins`` lists it.
"""
import os

from tempest.test_discover import plugins

from gpu_nova_ext.tempest_plugin import config

#: the directory holding the gpu_nova_ext package
_TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


class GpuNovaExtTempestPlugin(plugins.TempestPlugin):

    def load_tests(self):
        return (os.path.join(_TOP, 'gpu_nova_ext', 'tempest_plugin',
                             'tests'), _TOP)

    def register_opts(self, conf):
        config.register_opts(conf)

    def get_opt_lists(self):
        return config.list_opts()
