# SPDX-License-Identifier: Apache-2.0

"""GPU reservations in the scheduler: GpuReservationFilter, the owner's
GPU first (GpuCandidateOrderFilter), GpuReservationWeigher."""
from nova.scheduler import weights as nova_weights

from gpu_nova_ext.scheduler.filters import candidate_order
from gpu_nova_ext.scheduler.filters import facts
from gpu_nova_ext.scheduler import weighers as gpu_weighers
from gpu_nova_ext.scheduler.weighers import reservation as rweigher
from gpu_nova_ext.tests.unit.scheduler import base
from gpu_nova_ext.tests.unit.scheduler import nova_objects as no

VGPU = {'resources:VGPU': '1'}
OWNER = 'aaaa1111'
OTHER = 'bbbb2222'


def _gpus_of(host_state):
    """PCI address indexes of the GPUs the candidates draw from."""
    out = []
    for cand in host_state.allocation_candidates:
        for rp in cand['allocations']:
            for i in range(8):
                if rp == no.rp_uuid(host_state.host, no.pci(i)):
                    out.append(i)
    return out


class TestReservationFilter(base.PluginTestCase):

    def setUp(self):
        super().setUp()
        # "mixed": GPU 0 reserved for OWNER, GPU 1 free
        self.add_host('mixed', [no.gpu_state('mixed', 0, reserved_for=OWNER),
                                no.gpu_state('mixed', 1)])
        # "kept": its only GPU reserved for OWNER
        self.add_host('kept', [no.gpu_state('kept', 0, reserved_for=OWNER)])
        self.add_host('free', [no.gpu_state('free', 0)])

    def _hosts(self):
        return [no.host_state(h, allocation_candidates=no.candidates(h, gpus))
                for h, gpus in (('mixed', [0, 1]), ('kept', [0]),
                                ('free', [0]))]

    def _run(self, project, specs=VGPU):
        hosts = no.run_filters([facts.GpuReservationFilter()],
                               self._hosts(), no.request_spec(
                                   specs, project_id=project))
        return {h.host: _gpus_of(h) for h in hosts}

    def test_other_project_never_gets_a_reserved_gpu(self):
        self.assertEqual({'mixed': [1], 'free': [0]}, self._run(OTHER))
        self.assertIn('no GPU of host kept meets a GPU not reserved for '
                      'another project than %s' % OTHER, self.log.output)

    def test_owner_keeps_every_candidate(self):
        self.assertEqual({'mixed': [0, 1], 'kept': [0], 'free': [0]},
                         self._run(OWNER))

    def test_unconstrained_request_is_judged_too(self):
        # no gpu: key, only a VGPU resource: still a GPU request
        self.assertNotIn('kept', self._run(OTHER, {'resources:VGPU': '1'}))

    def test_non_gpu_request_untouched(self):
        hosts = [no.host_state('kept', allocation_candidates=no.
                               plain_candidates('kept'))]
        passed = no.run_filters([facts.GpuReservationFilter()], hosts,
                                no.request_spec({}, project_id=OTHER))
        self.assertEqual(['kept'], [h.host for h in passed])

    def test_host_without_state_follows_missing_state_policy(self):
        hosts = [no.host_state('nostate', allocation_candidates=no.
                               candidates('nostate', [0]))]
        spec = no.request_spec(VGPU, project_id=OTHER)
        self.assertEqual(1, len(no.run_filters(
            [facts.GpuReservationFilter()], hosts, spec)))
        self.flags(missing_state_policy='fail_all', group='gpu_scheduler')
        hosts = [no.host_state('nostate', allocation_candidates=no.
                               candidates('nostate', [0]))]
        spec = no.request_spec(VGPU, project_id=OTHER)
        self.assertEqual([], no.run_filters(
            [facts.GpuReservationFilter()], hosts, spec))

    def test_owner_gets_its_reserved_gpu_first(self):
        # pack would choose GPU 1 (less free); the owner's GPU 0 goes first
        self.add_host('mixed', [
            no.gpu_state('mixed', 0, reserved_for=OWNER),
            no.gpu_state('mixed', 1, available=2)])
        order = candidate_order.GpuCandidateOrderFilter()

        def first(project):
            [host] = no.run_filters(
                [facts.GpuReservationFilter(), order],
                [no.host_state('mixed', allocation_candidates=no.candidates(
                    'mixed', [1, 0]))],
                no.request_spec(VGPU, project_id=project))
            return _gpus_of(host)[0]
        self.assertEqual(0, first(OWNER))
        self.assertEqual(1, first(OTHER))
        # a project without reservations: the policy decides
        self.assertEqual(1, first('cccc3333'))


class TestReservationWeigher(base.PluginTestCase):

    def _ranking(self, weighers, hosts, project):
        spec = no.request_spec(VGPU, project_id=project)
        return [(w.obj.host, round(w.weight, 3))
                for w in no.weigh(weighers, hosts, spec)]

    def test_owner_prefers_its_gpu_over_packing_and_nova(self):
        # "busy" binpacks best, "mine" holds OWNER's GPU
        self.add_host('busy', [no.gpu_state('busy', 0, available=1)])
        self.add_host('mine', [no.gpu_state('mine', 0, reserved_for=OWNER)])
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('busy', 'mine')]
        everything = [c() for c in nova_weights.all_weighers()] + [
            c() for c in gpu_weighers.all_weighers()]
        self.assertEqual('mine', self._ranking(everything, hosts,
                                               OWNER)[0][0])
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('busy', 'mine')]
        self.assertEqual('busy', self._ranking(everything, hosts,
                                               OTHER)[0][0])

    def test_aggregate_tenant_metadata_counts(self):
        agg = no.aggregate('gpu-reserved-x', ['kept'],
                           {'filter_tenant_id': '%s, other' % OWNER})
        hosts = [no.host_state('kept', aggregates=[agg],
                               allocation_candidates=no.candidates('kept',
                                                                   [0])),
                 no.host_state('shared', allocation_candidates=no.
                               candidates('shared', [0]))]
        ranking = self._ranking([rweigher.GpuReservationWeigher()], hosts,
                                OWNER)
        self.assertEqual([('kept', 100.0), ('shared', 0.0)], ranking)
        self.assertTrue(rweigher.host_reserved_for(hosts[0], 'other'))
        self.assertFalse(rweigher.host_reserved_for(hosts[1], OWNER))

    def test_off(self):
        self.flags(reservation_weight_multiplier=0.0, group='gpu_weights')
        self.add_host('mine', [no.gpu_state('mine', 0, reserved_for=OWNER)])
        hosts = [no.host_state(h, allocation_candidates=no.candidates(h, [0]))
                 for h in ('other', 'mine')]
        self.assertEqual([0.0, 0.0], [w for _, w in self._ranking(
            [rweigher.GpuReservationWeigher()], hosts, OWNER)])
