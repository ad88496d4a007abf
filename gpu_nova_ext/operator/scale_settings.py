# SPDX-License-Identifier: Apache-2.0

"""The Placement and Nova settings under which packing holds at scale.

Nova's weighers only see the hosts Placement returned.  Nova asks for at
most ``[scheduler] max_placement_results`` allocation candidates (stock:
1,000); stock Placement generates *every* candidate depth-first, root by
root, and cuts the list to that limit in an order unrelated to load (a
set's order).  A host with k free GPUs offers k one-GPU candidates (and
k!/(k-n)! for an n-GPU request in separate request groups), so on a big
cloud the hosts a packing weigher wants fall out of the list before any
filter or weigher runs.

What we recommend (measured with ``tools/bench-placement-settings``;
doc/source/tuning.rst has the matrix):

* ``[placement] allocation_candidates_generation_strategy = breadth-first``
  with ``max_allocation_candidates`` = :func:`candidates` (the number of
  GPU compute hosts, at least :data:`CANDIDATES`): Placement stops
  generating at that many candidates, taking one from each viable host
  before a second from any, so every viable host is offered and the cost
  of a request is bounded (about a millisecond per candidate of a
  multi-GPU request, measured);
* ``[workarounds] optimize_for_wide_provider_trees = True``: multi-GPU
  requests on hosts of many GPU providers are generated without trying
  combinations that do not fit;
* Nova's ``[scheduler] max_placement_results`` = the same number, so that
  Nova's limit never cuts Placement's list (Placement applies the limit
  after generation, in an order unrelated to the round robin).

Both are option names of the installed Nova (34) and openstack-placement
(16; backported to 11.0.1, 12.0.1 and 13.0.0).  The simulator runs with
these unless a scenario says ``placement_conf: stock``.
"""

#: max_allocation_candidates and max_placement_results on clouds of up to
#: this many GPU compute hosts (Nova's stock limit); above, the host count
#: (every viable host is offered once before any host twice).
CANDIDATES = 1000


def candidates(gpu_hosts: int = 0) -> int:
    """The cap we recommend for a cloud of ``gpu_hosts`` GPU hosts."""
    return max(CANDIDATES, int(gpu_hosts))


#: ``{(group, option): value}`` of placement.conf.
PLACEMENT = {
    ('placement', 'max_allocation_candidates'): CANDIDATES,
    ('placement', 'allocation_candidates_generation_strategy'):
        'breadth-first',
    ('workarounds', 'optimize_for_wide_provider_trees'): True,
}
#: ``{(group, option): value}`` of nova.conf on the schedulers.
NOVA = {
    ('scheduler', 'max_placement_results'): CANDIDATES,
}

WHY = {
    ('placement', 'max_allocation_candidates'): (
        'Stop generating allocation candidates at this many: bounds the '
        'cost of a GET /allocation_candidates on wide GPU trees. With '
        'breadth-first every viable host is offered once before any host '
        'twice, so keep it at least the number of GPU compute hosts '
        '(%d or that number, whichever is larger).' % CANDIDATES),
    ('placement', 'allocation_candidates_generation_strategy'): (
        'Round-robin over hosts: with max_allocation_candidates, the '
        'candidates cover all viable hosts instead of the first ones '
        'found, so a packing or spreading weigher sees every host.'),
    ('workarounds', 'optimize_for_wide_provider_trees'): (
        'Multi-GPU flavors on hosts with many GPU providers: skip '
        'combinations that exceed capacity while generating them.'),
    ('scheduler', 'max_placement_results'): (
        'The same number as Placement\'s max_allocation_candidates (at '
        'least the number of GPU compute hosts): Placement cuts its list '
        'to this limit in an order unrelated to load, so a smaller limit '
        'drops the hosts packing wants.'),
}


def _ini(value) -> str:
    if isinstance(value, bool):
        return 'True' if value else 'False'
    return str(value)


PLACEMENT_HINT = ('Placement\'s part: gpu-nova-ext nova-conf '
                  '--placement-conf')


def comment(text: str, width: int = 77) -> list[str]:
    """``text`` as ``#`` comment lines."""
    import textwrap
    return ['# ' + line for line in textwrap.wrap(text, width - 2)]


def render(settings: dict, header: str) -> str:
    """An oslo.config drop-in of ``settings``, each with why."""
    out = comment(header)
    group = None
    for (section, option), value in sorted(settings.items()):
        if section != group:
            out += ['', '[%s]' % section]
            group = section
        out += comment(WHY[(section, option)])
        out.append('%s = %s' % (option, _ini(value)))
    return '\n'.join(out) + '\n'


def placement_conf() -> str:
    """The placement.conf drop-in we recommend."""
    return render(PLACEMENT, (
        'gpu-nova-ext: Placement settings under which GPU packing and '
        'spreading hold at scale (doc/source/tuning.rst). Put into '
        'placement.conf of every Placement API server and restart it; '
        'set [scheduler] max_placement_results to the same number in '
        'nova.conf of the schedulers (gpu-nova-ext nova-conf writes it).'))
