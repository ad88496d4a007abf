# SPDX-License-Identifier: Apache-2.0

"""Notifications of the operator's automated actions, over oslo.messaging.

Driver and topics from ``[oslo_messaging_notifications]`` (no driver:
none sent, as in every OpenStack service); each is sent on the caller's
thread and never raises.

``gpu.remediation.start|end|error``, publisher ``gpu-nova-ext.remediate``
(payload ``version`` 1.0)::

    {"version": "1.0", "server": "<uuid>", "server_name": "vm-1",
     "host": "cmp-1", "gpu": "0000:3b:00.0", "action": "live-migrate",
     "reason": "XID 79: GPU has fallen off the bus", "trigger": "notification",
     "dry_run": false, "outcome": "moved", "destination": "cmp-2",
     "error": null}

``outcome`` is ``started``, ``moved``, ``failed``, ``skipped``,
``notified`` or ``would-<action>`` (dry run).

``gpu.rollout.wave.start``, ``gpu.rollout.host.update``,
``gpu.rollout.host.error`` and ``gpu.rollout.end``, publisher
``gpu-nova-ext.rollout`` (``openstack gpu rollout run``; payload
``version`` 1.0)::

    {"version": "1.0", "target": "570", "driver": "570.86.15",
     "wave": 1, "waves": 2, "host": "cmp-1", "step": "drained",
     "error": null}

``step`` is where the host now is (``drained``, ``upgraded``, ``done``);
on ``gpu.rollout.host.error`` the step it failed at and ``error`` why;
``gpu.rollout.wave.start`` has ``hosts`` instead of ``host`` and
``step``; ``gpu.rollout.end`` ``hosts``, the number of hosts done.
"""
from oslo_log import log as logging

LOG = logging.getLogger(__name__)

PUBLISHER = 'gpu-nova-ext.remediate'
ROLLOUT_PUBLISHER = 'gpu-nova-ext.rollout'
PAYLOAD_VERSION = '1.0'
START = 'gpu.remediation.start'
END = 'gpu.remediation.end'
ERROR = 'gpu.remediation.error'
ROLLOUT_WAVE = 'gpu.rollout.wave.start'
ROLLOUT_HOST = 'gpu.rollout.host.update'
ROLLOUT_HOST_ERROR = 'gpu.rollout.host.error'
ROLLOUT_END = 'gpu.rollout.end'


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


class Notifier:
    """Sends one notification on the caller's thread; never raises.

    ``sent`` keeps what was asked, sent or not (the tests read it).
    """

    def __init__(self, conf, publisher: str = PUBLISHER):
        self.conf = conf
        self.publisher = publisher
        self._notifier = None
        self.sent: list[tuple[str, dict]] = []

    def _get(self):
        if self._notifier is None:
            import oslo_messaging
            transport = oslo_messaging.get_notification_transport(self.conf)
            self._notifier = oslo_messaging.Notifier(
                transport, publisher_id=self.publisher)
        return self._notifier

    def notify(self, event_type: str, payload: dict) -> None:
        self.sent.append((event_type, payload))
        try:
            notifier = self._get()
            method = (notifier.error if event_type.endswith('.error')
                      else notifier.info)
            method({}, event_type, payload)
        except Exception as exc:
            LOG.warning('Could not send %(event)s for %(about)s: %(error)s',
                        {'event': event_type,
                         'about': payload.get('server') or payload.get(
                             'host') or payload.get('target'),
                         'error': exc})
