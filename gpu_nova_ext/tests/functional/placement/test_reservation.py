# SPDX-License-Identifier: Apache-2.0

"""GPU reservations by trait against a real Placement: the operator's
reserve/unreserve and the agent's reporter reading them back."""
from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import reservation
from gpu_nova_ext.placement import client as pclient
from gpu_nova_ext.tests.functional.placement import base

OWNER = 'aaaa1111bbbb2222cccc3333dddd4444'
OTHER = 'eeee5555'


class TestGpuReservation(base.PlacementTestCase):

    def setUp(self):
        super().setUp()
        self.root, self.pgpus = self.vgpu_host(2)
        self.addrs = sorted(self.pgpus)
        self.reporter = self.make_reporter()

    def cycle(self):
        inv = base.make_inventory(self.HOST, self.addrs)
        result = self.reporter.report(inv)
        return inv, result

    def test_agent_reports_the_reservation_and_keeps_the_trait(self):
        self.cycle()
        lines = reservation.reserve_gpu(self.client, OWNER, self.HOST,
                                        self.addrs[0])
        trait = naming.reservation_trait(OWNER)
        self.assertEqual(['reserved GPU %s on %s for project %s (trait %s '
                          'on %s)' % (self.addrs[0], self.HOST, OWNER, trait,
                                      naming.pgpu_provider_name(
                                          self.HOST, self.addrs[0]))], lines)
        inv, result = self.cycle()
        self.assertEqual(OWNER, inv.gpu(self.addrs[0]).reserved_for)
        self.assertIsNone(inv.gpu(self.addrs[1]).reserved_for)
        self.assertEqual(OWNER, inv.gpu(self.addrs[0]).to_state()[
            'reserved_for'])
        self.assertNotIn('reserved_for', inv.gpu(self.addrs[1]).to_state())
        # the agent never removes it, and wrote nothing for it
        self.assertEqual(0, result.writes, result.changes)
        self.assertIn(trait, self.traits(self.pgpus[self.addrs[0]]))
        # the agent's own traits are still there
        self.assertIn('CUSTOM_GPU_MODE_VGPU',
                      self.traits(self.pgpus[self.addrs[0]]))

        listed = reservation.trait_reservations(self.client)
        self.assertEqual([(OWNER, self.HOST, self.addrs[0],
                           'A100_80GB_PCIE', 'trait')],
                         [(r.project, r.host, r.gpu, r.model, r.mechanism)
                          for r in listed])

        reservation.unreserve_gpu(self.client, OWNER, self.HOST,
                                  self.addrs[0])
        inv, _ = self.cycle()
        self.assertIsNone(inv.gpu(self.addrs[0]).reserved_for)
        self.assertEqual([], reservation.trait_reservations(self.client))

    def test_reserved_for_another_project_is_refused_unless_forced(self):
        reservation.reserve_gpu(self.client, OWNER, self.HOST, self.addrs[0])
        again = reservation.reserve_gpu(self.client, OWNER, self.HOST,
                                        self.addrs[0])
        self.assertIn('reserved for project %s already' % OWNER, again[0])
        exc = self.assertRaises(
            exception.ReservationError, reservation.reserve_gpu,
            self.client, OTHER, self.HOST, self.addrs[0])
        self.assertIn('it is reserved for project %s' % OWNER, str(exc))
        self.assertIn('--force', str(exc))
        exc = self.assertRaises(
            exception.ReservationError, reservation.unreserve_gpu,
            self.client, OTHER, self.HOST, self.addrs[0])
        self.assertIn('Give --project %s' % OWNER, str(exc))
        lines = reservation.reserve_gpu(self.client, OTHER, self.HOST,
                                        self.addrs[0], force=True)
        self.assertIn('(moved from project %s: --force)' % OWNER, lines[0])
        traits = self.traits(self.pgpus[self.addrs[0]])
        self.assertIn(naming.reservation_trait(OTHER), traits)
        self.assertNotIn(naming.reservation_trait(OWNER), traits)
        # another writer's trait is kept
        self.assertIn('OWNER_NOVA', traits)

    def test_concurrent_writer_is_kept_after_a_conflict(self):
        rp = self.pgpus[self.addrs[0]]
        test = self
        puts = []

        class Racing(pclient.PlacementClient):
            def request(self, method, path, body=None, version=None):
                if method == 'PUT' and path.endswith('/traits') and (
                        not puts):
                    # another writer gets in between our read and write
                    test.add_traits(rp, 'CUSTOM_RACK_7')
                if method == 'PUT' and path.endswith('/traits'):
                    puts.append(path)
                return super().request(method, path, body,
                                       version=version)

        client = Racing(self.conf)
        reservation.reserve_gpu(client, OWNER, self.HOST, self.addrs[0])
        traits = self.traits(rp)
        self.assertIn('CUSTOM_RACK_7', traits)
        self.assertIn(naming.reservation_trait(OWNER), traits)
        # the first PUT met 409 (generation moved), the re-read one passed
        self.assertEqual(2, len(puts))

    def test_unknown_gpu_and_host(self):
        exc = self.assertRaises(
            exception.ReservationError, reservation.reserve_gpu,
            self.client, OWNER, self.HOST, '0000:99:00.0')
        self.assertIn('Placement has no GPU provider for it (GPU providers '
                      'there: %s)' % ', '.join(self.addrs), str(exc))
        exc = self.assertRaises(
            exception.UnknownHost, reservation.reserve_gpu,
            self.client, OWNER, 'nosuch', self.addrs[0])
        self.assertIn("No host 'nosuch' in Placement", str(exc))
        exc = self.assertRaises(
            exception.InvalidArgument, reservation.reserve_gpu,
            self.client, 'bad project', self.HOST, self.addrs[0])
        self.assertIn('--project', str(exc))


class TestPciProviders(base.PlacementTestCase):

    def test_pci_in_placement_gpu_is_refused(self):
        _root, pcis = self.pci_host(1)
        [addr] = pcis
        exc = self.assertRaises(
            exception.ReservationError, reservation.reserve_gpu,
            self.client, OWNER, self.HOST, addr)
        self.assertIn('Reserve the whole host instead', str(exc))
        self.assertIn('PCI-in-Placement', str(exc))
        self.assertFalse(any(t.startswith(naming.RESERVATION_PREFIX)
                             for t in self.traits(pcis[addr])))
