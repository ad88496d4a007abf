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

"""``gpu.remediation.start|end|error`` notifications over oslo.messaging.

Publisher ``gpu-nova-ext.remediate``, driver and topics from
``[oslo_messaging_notifications]`` (no driver: none sent, as in every
OpenStack service).  Payload (``version`` 1.0)::

    {"version": "1.0", "server": "<uuid>", "server_name": "vm-1",
     "host": "cmp-1", "gpu": "0000:3b:00.0", "action": "live-migrate",
     "reason": "XID 79: GPU has fallen off the bus", "trigger": "notification",
     "dry_run": false, "outcome": "moved", "destination": "cmp-2",
     "error": null}

``outcome`` is ``started``, ``moved``, ``failed``, ``skipped``,
``notified`` or ``would-<action>`` (dry run).
"""
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

PUBLISHER = 'gpu-nova-ext.remediate'
PAYLOAD_VERSION = '1.0'
START = 'gpu.remediation.start'
END = 'gpu.remediation.end'
ERROR = 'gpu.remediation.error'


def build_payload(decision, trigger, dry_run: bool, outcome: str,
                  destination: str | None = None,
                  error: str | None = None) -> dict:
    return {
        'version': PAYLOAD_VERSION,
        'server': decision.server,
        'server_name': decision.name,
        'host': decision.host,
        'gpu': decision.gpu,
        'action': decision.action,
        'reason': '%s; %s' % (trigger.reason, decision.reason),
        'trigger': trigger.source,
        'dry_run': dry_run,
        'outcome': outcome,
        'destination': destination,
        'error': error,
    }


class RemediationNotifier:
    """Sends one notification on the caller's thread; never raises."""

    def __init__(self, conf):
        self.conf = conf
        self._notifier = None
        self.sent: list[tuple[str, dict]] = []

    def _get(self):
        if self._notifier is None:
            import oslo_messaging
            transport = oslo_messaging.get_notification_transport(self.conf)
            self._notifier = oslo_messaging.Notifier(
                transport, publisher_id=PUBLISHER)
        return self._notifier

    def notify(self, event_type: str, payload: dict) -> None:
        self.sent.append((event_type, payload))
        try:
            notifier = self._get()
            method = notifier.error if event_type == ERROR else notifier.info
            method({}, event_type, payload)
        except Exception as exc:
            LOG.warning('Could not send %(event)s for server %(server)s: '
                        '%(error)s', {'event': event_type,
                                      'server': payload['server'],
                                      'error': exc})
