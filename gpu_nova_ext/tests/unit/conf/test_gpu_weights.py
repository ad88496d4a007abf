# SPDX-License-Identifier: Apache-2.0

"""[gpu_weights] refuses multipliers that are not finite (issue 16.4)."""
from oslo_config import cfg
import testtools

from gpu_nova_ext.conf import gpu_weights


class TestMultipliers(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.conf = cfg.ConfigOpts()
        gpu_weights.register_opts(self.conf)
        self.conf([])

    def test_nan_and_infinities_are_refused(self):
        for opt in gpu_weights.gpu_weights_opts:
            if not opt.name.endswith('_weight_multiplier'):
                continue
            for bad in ('nan', 'inf', '-inf', '1e300'):
                self.assertRaises(ValueError, self.conf.set_override,
                                  opt.name, bad, 'gpu_weights')
            self.conf.set_override(opt.name, '-2.5', 'gpu_weights')
            self.assertEqual(-2.5, getattr(self.conf.gpu_weights, opt.name))
