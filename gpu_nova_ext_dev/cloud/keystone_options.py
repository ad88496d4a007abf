# SPDX-License-Identifier: Apache-2.0

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
