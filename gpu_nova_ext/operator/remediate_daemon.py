# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext remediate`` as a daemon: ``gpu.health.update``
notifications in, triggers out, with a periodic sweep of the cloud as a
fallback for notifications that never arrived.

The listener only queues; one loop thread plans and carries out, so two
notifications for one GPU never move a server twice (the controller also
skips a server already being moved).
"""
import queue
import threading

from oslo_log import log as logging

from gpu_nova_ext.agent import notifications as health_notifications
from gpu_nova_ext.operator import remediation_policy as policy

LOG = logging.getLogger(__name__)

UNHEALTHY = 'unhealthy'


def trigger_from_health(payload: dict) -> policy.Trigger | None:
    """The trigger of a ``gpu.health.update`` payload.

    None unless the GPU turned unhealthy.
    """
    if payload.get('new_state') != UNHEALTHY:
        return None
    if payload.get('old_state') == UNHEALTHY:
        return None
    return policy.Trigger(
        host=payload['host'], gpu=payload['gpu']['pci_address'],
        reason='; '.join(payload.get('reasons') or []) or 'unhealthy',
        source='notification')


def triggers_from_audit(report) -> list[policy.Trigger]:
    """Triggers for the unhealthy GPUs of an audit report (the sweep)."""
    return [policy.Trigger(host=g.host, gpu=g.address,
                           reason='; '.join(g.reasons) or 'unhealthy',
                           source='sweep')
            for g in report.unhealthy if g.address]


class _Endpoint:
    filter_rule = None

    def __init__(self, triggers: queue.Queue):
        self.triggers = triggers

    def _record(self, ctxt, publisher_id, event_type, payload, metadata):
        if event_type != health_notifications.EVENT_TYPE:
            return
        try:
            trigger = trigger_from_health(payload)
        except (KeyError, TypeError) as exc:
            LOG.warning('Ignoring a malformed %(event)s from %(pub)s: '
                        'missing %(err)s', {'event': event_type,
                                            'pub': publisher_id,
                                            'err': exc})
            return
        if trigger is not None:
            LOG.info('GPU %(gpu)s on %(host)s is unhealthy (%(why)s)',
                     {'gpu': trigger.gpu, 'host': trigger.host,
                      'why': trigger.reason})
            self.triggers.put(trigger)

    # gpu.health.update goes out at info, warn or error priority
    info = warn = error = _record


class RemediationDaemon:
    """Listens, sweeps and remediates until :meth:`stop`.

    :param remediator: a :class:`~gpu_nova_ext.operator.remediate.Remediator`
    :param sweep: a callable returning the triggers of the cloud's
        unhealthy GPUs (None: no sweep)
    """

    def __init__(self, conf, remediator, sweep=None):
        self.conf = conf
        self.remediator = remediator
        self.sweep = sweep
        self.triggers: queue.Queue = queue.Queue()
        self.stopping = threading.Event()
        self._listener = None
        self.results: list = []

    def start_listener(self) -> None:
        import oslo_messaging
        transport = oslo_messaging.get_notification_transport(self.conf)
        targets = [oslo_messaging.Target(
            topic=self.conf.remediation.listen_topic)]
        # a pool of its own: without one, the daemon and every other
        # pool-less consumer of the topic (Ceilometer) would share one
        # queue and each hear only part of the stream
        self._listener = oslo_messaging.get_notification_listener(
            transport, targets, [_Endpoint(self.triggers)],
            executor='threading',
            pool=self.conf.remediation.listener_pool)
        self._listener.start()

    def stop(self) -> None:
        self.stopping.set()
        self.triggers.put(None)
        if self._listener is not None:
            self._listener.stop()
            self._listener.wait()
            self._listener = None

    def run(self) -> None:
        """Handle triggers until stopped; sweep every sweep_interval."""
        interval = self.conf.remediation.sweep_interval
        if self.sweep and interval:
            self._sweep()
        while not self.stopping.is_set():
            try:
                trigger = self.triggers.get(
                    timeout=interval if (self.sweep and interval) else None)
            except queue.Empty:
                self._sweep()
                continue
            if trigger is not None:
                self.handle(trigger)

    def handle(self, trigger: policy.Trigger) -> list:
        try:
            results = self.remediator.run(trigger)
        except Exception as exc:
            # a daemon reports and carries on with the next trigger
            LOG.error('Remediation of %(host)s GPU %(gpu)s failed: %(err)s',
                      {'host': trigger.host, 'gpu': trigger.gpu,
                       'err': exc})
            self.remediator.report('ERROR %s GPU %s: %s' % (
                trigger.host, trigger.gpu, exc))
            return []
        self.results += results
        return results

    def _sweep(self) -> None:
        try:
            triggers = self.sweep()
        except Exception as exc:
            LOG.warning('Sweep of the cloud failed: %s', exc)
            return
        for trigger in triggers:
            self.triggers.put(trigger)
