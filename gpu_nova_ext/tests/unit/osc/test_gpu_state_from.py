# SPDX-License-Identifier: Apache-2.0

"""``gpu list``'s ``State From``: which source answered, and how old."""
import testtools

from gpu_nova_ext.operator import audit
from gpu_nova_ext.osc import gpu as gpu_cmd


def view(source):
    return audit.GpuView(host='h1', address='0000:3b:00.0', model='L4',
                         mode='vgpu', source=source)


class TestStateFrom(testtools.TestCase):

    def test_each_source(self):
        sources = {'h1': {'source': 'placement', 'age_s': 300.0,
                          'stale': False}}
        self.assertEqual('placement, 5 min old',
                         gpu_cmd.state_from(view('placement'), sources))
        sources['h1'].update(age_s=3 * 3600.0, stale=True)
        self.assertEqual('placement, 3 h old, stale',
                         gpu_cmd.state_from(view('placement'), sources))
        self.assertEqual('agent', gpu_cmd.state_from(view('agent'), {}))
        self.assertIsNone(gpu_cmd.state_from(view(None), sources))

    def test_a_column_of_every_row(self):
        self.assertIn('State From', gpu_cmd.COLUMNS)
        row = gpu_cmd.row(view('agent'), [])
        self.assertEqual(set(gpu_cmd.COLUMNS + gpu_cmd.LONG_COLUMNS),
                         set(row))
        self.assertEqual('agent', row['State From'])
