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

"""What a development Keystone is configured with beyond its database.

The dev cloud's Keystone (:mod:`.devcloud`) and the functional tests' one
(``gpu_nova_ext/tests/functional/nova/keystone_server.py``, a process
that must not import Nova, so not :mod:`.devcloud`) both take these.
"""

#: keystone.conf sections: passwords hashed with bcrypt's fewest rounds,
#: not its default 12 (a quarter of a second of CPU per login, and every
#: service, agent and ``openstack`` command logs in); Keystone's own
#: cache in memory, which its one process (or gunicorn worker) holds,
#: where devstack uses memcached (Nova's unified-limits checks ask
#: Keystone at every boot).  A development Keystone, not a secure one.
DEV_OPTIONS = {
    'identity': {'password_hash_rounds': '4'},
    'cache': {'enabled': 'true', 'backend': 'dogpile.cache.memory'},
}
