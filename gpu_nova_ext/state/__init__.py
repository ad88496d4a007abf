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

"""The GPU state channel (design doc: State protocol).

``schema`` defines the wire format (``schemas.json``, both sides),
``rpc`` runs the cache's RPC server for the life of the scheduler
(``StateListener``, over :mod:`gpu_nova_ext.messaging`), ``records`` is
what the plugins read, ``cache`` keeps the newest live state per host
inside each nova-scheduler process.  Nothing here imports the inventory
sources, pynvml or libvirt, nor the agent.
"""
