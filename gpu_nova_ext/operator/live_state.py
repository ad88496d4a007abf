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

"""The agents' GPU state (health, driver version) as the schedulers hear
it on their transport_url, listened to for a while.

What ``openstack gpu list|audit --state-wait``, ``openstack gpu host
undrain`` and ``gpu-nova-ext remediate`` read besides Placement.
"""
import math
import time

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import exception

LOG = logging.getLogger(__name__)

#: the longest --state-wait: agents cast every report_interval (60 s by
#: default), so a few minutes hear every live agent
MAX_STATE_WAIT = 3600.0


def live_states(conf: cfg.ConfigOpts, wait: float) -> dict[str, dict]:
    """GPU state payloads by host, heard within ``wait`` seconds.

    Best effort: an unreachable message bus gives an empty answer and a
    warning.
    """
    from gpu_nova_ext.state import cache as state_cache

    cache = state_cache.get_cache()
    try:
        cache.start(conf)
    except Exception as exc:
        LOG.warning('No live GPU state (%s); auditing from Placement only.',
                    exc)
        return {}
    try:
        time.sleep(wait)
        return {host: cache.get(host) for host in cache.hosts()
                if cache.get(host)}
    finally:
        cache.stop()


def check_state_wait(value: float) -> float:
    if not (math.isfinite(value) and 0 <= value <= MAX_STATE_WAIT):
        raise exception.InvalidArgument(
            argument='--state-wait', value=value,
            reason='give the seconds to listen for the agents, from 0 to '
                   '%d' % MAX_STATE_WAIT)
    return value
