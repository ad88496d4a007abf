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

"""[DEFAULT] options of the gpu-nova-agent's own configuration file.

These are registered on the agent's configuration only: nova-scheduler and
nova-api have their own ``[DEFAULT] host``.
"""
import socket

from oslo_config import cfg

default_opts = [
    cfg.StrOpt(
        'host',
        default=socket.gethostname(),
        sample_default='<current_hostname>',
        help="""
Name of this compute host, exactly as nova-compute uses it.

The agent finds the compute node resource provider that nova-compute
created for this host by this name (the hypervisor hostname).  Set it to
the same value as ``[DEFAULT] host`` in this host's nova.conf when that is
set there.
"""),
]


def register_opts(conf):
    conf.register_opts(default_opts)


def list_opts():
    return {'DEFAULT': default_opts}
