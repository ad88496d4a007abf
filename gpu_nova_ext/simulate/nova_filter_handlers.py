# SPDX-License-Identifier: Apache-2.0

"""Nova's filter and weight handlers, loaded and run as HostManager does.

The filters and weighers ``[filter_scheduler]`` names, run by Nova's own
handlers, recording what each did so that the output can say why a host
won, and (for ``openstack gpu explain``) why each other host lost: the
filter that removed it and, for our GPU filters, the GPUs whose facts
failed the request's constraint, judged by the filter's own
``fact_passes``.
"""
import dataclasses
import random

from oslo_config import cfg

from gpu_nova_ext.simulate import scenario as scn


@dataclasses.dataclass(kw_only=True, slots=True)
class Removal:
    """Why one filter removed one host."""

    filter: str
    #: what the request needs, in the filter's words (``describe``), or
    #: the first line of a Nova filter's docstring
    need: str
    #: (PCI addresses, what they have) of the GPUs that failed
    failing: list[tuple[list[str], str]] = dataclasses.field(
        default_factory=list)


def _first_line(cls) -> str:
    doc = (cls.__doc__ or '').strip()
    return doc.splitlines()[0].strip() if doc else ''


def _fact_text(family: str, fact) -> str:
    """One GPU fact of a filter family, as a reason says it."""
    from gpu_nova_ext.state import records
    from gpu_nova_ext.state import schema
    if family == records.FAMILY_MODEL:
        vendor, model, mode, vgpu_types = fact
        return 'model %s (%s, %s%s)' % (
            model or '?', vendor or '?', mode or '?',
            ', vGPU type %s' % ','.join(sorted(vgpu_types))
            if vgpu_types else '')
    if family == records.FAMILY_MEMORY:
        return '%s MiB' % ('?' if fact is None else fact)
    if family == records.FAMILY_CAPABILITY:
        return 'CUDA %s, driver %s' % tuple(
            '.'.join(map(str, v)) if v else '?' for v in fact)
    if family == records.FAMILY_HEALTH:
        return schema.HEALTH_STATES[fact] if 0 <= fact < len(
            schema.HEALTH_STATES) else 'health rank %s' % fact
    if family == records.FAMILY_RESERVATION:
        return 'reserved for project %s' % fact
    return str(fact)


def gpu_removal(filter_obj, host_state, spec_obj) -> Removal:
    """Why one of our GPU filters removed ``host_state``.

    The request's constraint and the host's GPU facts as the filter saw
    them (the request's context and the host's state record), each fact
    judged by the filter's ``fact_passes``: no rule is repeated here.
    """
    from gpu_nova_ext.scheduler import context as request_context
    name = type(filter_obj).__name__
    ctx = request_context.request_context(spec_obj)
    errors = ctx.request.errors_for(name)
    if errors:
        return Removal(filter=name, need="valid gpu: extra specs (%s)" % (
            '; '.join('%s=%s: %s' % (e.key, e.value, e.reason)
                      for e in errors)))
    record = ctx.record(host_state)
    if record is None:
        return Removal(filter=name, need='live GPU state of the host '
                       '(none within [gpu_scheduler] state_ttl)')
    constraint = filter_obj.request_constraint(ctx)
    out = Removal(filter=name, need=filter_obj.describe(constraint))
    family = getattr(filter_obj, 'FAMILY', '')
    try:
        groups = list(filter_obj.fact_groups(record))
        for fact, providers in groups:
            if filter_obj.fact_passes(fact, constraint):
                continue
            addresses = sorted({record.by_provider[rp].pci_address
                                for rp in providers
                                if rp in record.by_provider})
            out.failing.append((addresses, _fact_text(family, fact)))
    except (NotImplementedError, KeyError, TypeError):
        # a filter that judges candidates, not one fact per GPU
        # (GpuTopologyFilter): what it needs says it
        pass
    return out


def load_scheduler(scenario: scn.Scenario,
                   conf: cfg.ConfigOpts) -> 'Scheduler':
    """The filters and weighers that ``[filter_scheduler]`` names.

    A name that does not load is a ScenarioError naming the option.
    """
    from nova import exception as nova_exc
    try:
        return Scheduler(conf)
    except ValueError as exc:
        raise scenario.error('nova_conf.filter_scheduler.enabled_filters',
                             '%s. Fix the name or add the filter\'s module '
                             'to available_filters.' % exc)
    except nova_exc.ClassNotFound as exc:
        raise scenario.error(
            'nova_conf.filter_scheduler', '%s. Check available_filters and '
            'weight_classes.' % exc.format_message())
    except ImportError as exc:
        raise scenario.error(
            'nova_conf.filter_scheduler', 'cannot load %s. Check '
            'available_filters and weight_classes.'
            % str(exc).split(' (', 1)[0])


class Scheduler:
    """Nova's filter and weight handlers, loaded as HostManager does.

    Filter and weigher classes are subclassed once each to record what they
    did (which hosts a filter removed; each weigher's normalized weight and
    multiplier per host), without changing how Nova runs them.
    """

    def __init__(self, conf: cfg.ConfigOpts):
        from nova.scheduler import filters
        from nova.scheduler import weights
        self.conf = conf
        self.filter_handler = filters.HostFilterHandler()
        classes = self.filter_handler.get_matching_classes(
            conf.filter_scheduler.available_filters)
        by_name = {cls.__name__: cls for cls in classes}
        self.filters = []
        self.filter_log: list[tuple[str, list[str]]] = []
        # host -> filter -> providers whose candidates the filter dropped
        self.pruned: dict[str, dict[str, set[str]]] = {}
        for name in conf.filter_scheduler.enabled_filters:
            if name not in by_name:
                raise ValueError(
                    'filter %r is enabled but not available (available: %s)'
                    % (name, ', '.join(sorted(by_name))))
            self.filters.append(self._recording_filter(by_name[name])())
        #: host -> why it was removed (kept only while ``explaining``)
        self.explaining = False
        self.removals: dict[str, Removal] = {}
        #: the filtered hosts by weight, best first (the last select)
        self.ranked: list[str] = []
        self.total_weights: dict[str, float] = {}
        self.weight_handler = weights.HostWeightHandler()
        self.weight_log: dict[str, dict[str, float]] = {}
        self.weighers = [
            self._recording_weigher(cls)()
            for cls in self.weight_handler.get_matching_classes(
                conf.filter_scheduler.weight_classes)]

    def _recording_filter(self, cls):
        from gpu_nova_ext.scheduler import filtering
        log = self.filter_log
        pruned = self.pruned
        sched = self
        ours = issubclass(cls, filtering.GpuFilter)

        def providers(candidates):
            return {rp for cand in candidates for rp in cand['allocations']}

        def filter_all(inner, filter_obj_list, spec_obj):
            before = list(filter_obj_list)
            # the candidate lists as they were (a filter may replace or
            # shorten them); providers are compared only where it did
            had = {id(h): list(h.allocation_candidates) for h in before}
            result = cls.filter_all(inner, before, spec_obj)
            if result is None:
                return None
            after = list(result)
            kept = {id(h) for h in after}
            removed = [h for h in before if id(h) not in kept]
            log.append((cls.__name__, [h.host for h in removed]))
            if sched.explaining:
                for host in removed:
                    sched.removals[host.host] = (
                        gpu_removal(inner, host, spec_obj) if ours else
                        Removal(filter=cls.__name__,
                                need=_first_line(cls)))
            for host in after:
                old = had[id(host)]
                if len(old) == len(host.allocation_candidates):
                    continue
                # candidates this filter dropped on a host it kept
                dropped = providers(old) - providers(
                    host.allocation_candidates)
                if dropped:
                    pruned.setdefault(host.host, {}).setdefault(
                        cls.__name__, set()).update(dropped)
            return after

        return type(cls.__name__, (cls,), {'filter_all': filter_all,
                                           '__module__': cls.__module__})

    def _recording_weigher(self, cls):
        log = self.weight_log
        from nova import weights as nova_weights

        def weigh_objects(inner, weighed_obj_list, weight_properties):
            raw = cls.weigh_objects(inner, weighed_obj_list,
                                    weight_properties)
            normalized = list(nova_weights.normalize(
                raw, minval=inner.minval, maxval=inner.maxval))
            inner._normalized = {id(o.obj): w for o, w in
                                 zip(weighed_obj_list, normalized)}
            return raw

        def weight_multiplier(inner, host_state):
            multiplier = cls.weight_multiplier(inner, host_state)
            norm = getattr(inner, '_normalized', {}).get(id(host_state), 0.0)
            log.setdefault(host_state.host, {})[cls.__name__] = (
                multiplier * norm)
            return multiplier

        return type(cls.__name__, (cls,), {
            'weigh_objects': weigh_objects,
            'weight_multiplier': weight_multiplier,
            '__module__': cls.__module__})

    def select(self, hosts: list, spec, index: int = 0) -> list:
        """``SchedulerManager._get_sorted_hosts``: filter, weigh, order."""
        self.filter_log.clear()
        self.pruned.clear()
        self.weight_log.clear()
        self.removals.clear()
        self.ranked = []
        self.total_weights = {}
        filtered = self.filter_handler.get_filtered_objects(
            self.filters, hosts, spec, index)
        if not filtered:
            return []
        weighed = self.weight_handler.get_weighed_objects(
            self.weighers, filtered, spec)
        if self.conf.filter_scheduler.shuffle_best_same_weighed_hosts:
            best = [w for w in weighed if w.weight == weighed[0].weight]
            random.shuffle(best)
            weighed = best + weighed[len(best):]
        ordered = [w.obj for w in weighed]
        self.ranked = [w.obj.host for w in weighed]
        self.total_weights = {w.obj.host: w.weight for w in weighed}
        subset = ordered[:self.conf.filter_scheduler.host_subset_size]
        chosen = random.choice(subset)
        ordered.remove(chosen)
        return [chosen] + ordered

    def rejection(self, shown: int = 10) -> str:
        """Which filter removed which hosts, for a NoValidHost message."""
        parts = ['%s removed %s%s' % (
            name, ', '.join(hosts[:shown]),
            ' and %d more' % (len(hosts) - shown)
            if len(hosts) > shown else '')
            for name, hosts in self.filter_log if hosts]
        return '; '.join(parts) or 'no host passed the filters'
