# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Entry points of oslo-config-generator (``oslo.config.opts``)."""
from gpu_nova_ext import conf


def _collect(modules):
    groups = {}
    for module in modules:
        for group, opts in module.list_opts().items():
            groups.setdefault(group, []).extend(opts)
    return list(groups.items())


def list_agent_opts():
    """Options of gpu-nova-agent.conf (also read by gpu-nova-ext)."""
    return _collect(conf.AGENT_MODULES)


def list_nova_opts():
    """Options gpu_nova_ext reads from nova.conf inside nova-scheduler."""
    return _collect(conf.NOVA_MODULES)


def list_opts():
    return list_agent_opts() + list_nova_opts()
