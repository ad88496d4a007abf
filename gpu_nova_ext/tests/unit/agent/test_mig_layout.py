# SPDX-License-Identifier: Apache-2.0

"""MIG layouts: parsing, refusals, placements, plans (no I/O)."""
from oslotest import base

from gpu_nova_ext.agent import mig_layout
from gpu_nova_ext import exception


class TestParse(base.BaseTestCase):

    def refused(self, value):
        exc = self.assertRaises(exception.InvalidOption,
                                mig_layout.parse_layouts, [value])
        message = exc.format_message()
        self.assertNotIn('\n', message)
        self.assertIn('[mig] layouts', message)
        return message

    def test_full_layouts_of_each_documented_model(self):
        for value in ('A100_SXM4_40GB:1g.5gb=7',
                      'A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2',
                      'A30:2g.12gb=1,1g.6gb=2',
                      'H100_80GB_HBM3:4g.40gb=1,3g.40gb=1',
                      'H200:1g.35gb=4',
                      'B200:7g.180gb=1'):
            layout = mig_layout.parse_layout(value)
            spans = sorted((s, s + p.memory_slices)
                           for p, s in layout.placements)
            for (a_start, a_end), (b_start, _b) in zip(spans, spans[1:]):
                self.assertLessEqual(a_end, b_start, value)

    def test_placements_use_documented_starts(self):
        layout = mig_layout.parse_layout(
            'A100_80GB_PCIE:3g.40gb=1,2g.20gb=1,1g.10gb=2')
        placed = sorted((p.name, s) for p, s in layout.placements)
        # largest first: 3g at 0, 2g at 4 and 1g at 6 leave slice 7, no
        # 1g start: the search backtracks to 3g at 4
        self.assertEqual([('1g.10gb', 2), ('1g.10gb', 3), ('2g.20gb', 0),
                          ('3g.40gb', 4)], placed)

    def test_model_without_mig(self):
        message = self.refused('L4:1g.5gb=1')
        self.assertIn('GPU model L4 has no MIG profiles', message)

    def test_profile_the_model_lacks(self):
        message = self.refused('A30:3g.20gb=1')
        self.assertIn("GPU model A30 has no MIG profile '3g.20gb'", message)
        self.assertIn('4g.24gb', message)

    def test_too_many_slices(self):
        message = self.refused('A100_80GB_PCIE:7g.80gb=1,1g.10gb=1')
        self.assertIn('GPU model A100_80GB_PCIE cannot hold', message)
        self.assertIn('8 of 7 compute', message)

    def test_memory_slices_exhausted(self):
        # 3 + 3 + 1 compute slices fit 7, but 4 + 4 + 2 memory slices
        # exceed 8
        message = self.refused('H200:3g.71gb=2,1g.35gb=1')
        self.assertIn('GPU model H200 cannot hold', message)
        self.assertIn('10 of 8 memory', message)

    def test_more_than_the_instance_count(self):
        message = self.refused('B200:1g.23gb+me=2')
        self.assertIn('at most 1 instance(s) of MIG profile 1g.23gb+me',
                      message)

    def test_bad_syntax_and_count(self):
        self.assertIn('expected MODEL:PROFILE=COUNT',
                      self.refused('A100_80GB_PCIE'))
        self.assertIn('whole number', self.refused('A30:1g.6gb=x'))

    def test_one_layout_per_model(self):
        exc = self.assertRaises(
            exception.InvalidOption, mig_layout.parse_layouts,
            ['A30:4g.24gb=1', 'A30:1g.6gb=4'])
        self.assertIn('two layouts', exc.format_message())

    def test_passthrough_of_the_model_refused(self):
        layouts = mig_layout.parse_layouts(['A100_80GB_PCIE:7g.80gb=1'])
        exc = self.assertRaises(
            exception.InvalidOption, mig_layout.check_passthrough, layouts,
            ['{"vendor_id": "10de", "product_id": "20b5"}'])
        self.assertIn('GPU model A100_80GB_PCIE is whole-GPU passthrough',
                      exc.format_message())
        mig_layout.check_passthrough(
            layouts, ['{"vendor_id": "10de", "product_id": "27b8"}'])


class TestPlan(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.layout = mig_layout.parse_layout('A30:2g.12gb=1,1g.6gb=2')

    def plan(self, current, pending, instances, busy=()):
        return mig_layout.plan_gpu('0000:3b:00.0', 'A30', self.layout,
                                   current, pending, instances, busy)

    def test_mig_off(self):
        plan = self.plan(False, False, [])
        self.assertEqual('enable', plan.steps[0][0])
        self.assertEqual(['create'] * 3, [k for k, _w in plan.steps[1:]])
        self.assertFalse(plan.in_line)

    def test_layout_holds_wherever_its_instances_are(self):
        plan = self.plan(True, True, [('1g.6gb', 0), ('1g.6gb', 1),
                                      ('2g.12gb', 2)])
        self.assertTrue(plan.in_line)

    def test_other_layout_destroyed_first(self):
        plan = self.plan(True, True, [('4g.24gb', 0)])
        self.assertEqual(('destroy', ('4g.24gb', 0)), plan.steps[0])
        self.assertEqual(3, len(plan.steps[1:]))

    def test_pending_reset(self):
        plan = self.plan(False, True, [])
        self.assertEqual([], plan.steps)
        self.assertIn('needs a reset', plan.pending[0])

    def test_busy_is_carried(self):
        plan = self.plan(False, False, [], busy=['server x holds it'])
        self.assertEqual(['server x holds it'], plan.blocked)
