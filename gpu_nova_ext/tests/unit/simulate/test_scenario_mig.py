# SPDX-License-Identifier: Apache-2.0

"""Scenario checks of mig:, power: and mig_variants: (no service runs)."""
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import hostgen
from gpu_nova_ext.simulate import scenario as scn

A100 = 'A100_80GB_PCIE'


def _data(host=None, **top):
    host = dict({'name': 'a100', 'count': 2,
                 'gpus': [{'model': A100, 'count': 2}],
                 'mig': '%s:2g.20gb=3,1g.10gb=1' % A100}, **(host or {}))
    return dict({'hosts': [host],
                 'flavors': [{'name': 'f', 'vcpus': 1, 'ram_mb': 1,
                              'extra_specs': {
                                  'resources:CUSTOM_VGPU_MIG_1G_10GB': 1}}],
                 'boots': [{'flavor': 'f'}]}, **top)


class MigScenarioTest(testtools.TestCase):

    def load(self, data, variant=None):
        return scn.from_dict(data, '/x/s.yaml', variant)

    def refused(self, data, variant=None):
        return str(self.assertRaises(exception.ScenarioError, self.load,
                                     data, variant))

    def test_laid_out_gpus(self):
        host = self.load(_data()).hosts[0]
        self.assertEqual({A100: '2g.20gb=3,1g.10gb=1'}, host.mig_layouts)
        self.assertEqual('vgpu', host.nova_gpu_mode)
        self.assertEqual(['nvidia-mig-a100d-2-20c', 'nvidia-mig-a100d-1-10c'],
                         host.enabled_mdev_types)
        two = host.mig_types['nvidia-mig-a100d-2-20c']
        self.assertEqual(('A100D-2-20C', 'CUSTOM_VGPU_MIG_2G_20GB', 2 / 7),
                         (two.name, two.resource_class, two.units))
        # per GPU a PF and one VF per instance; each VF one type
        vfs = [f for f in host.pci_functions if f.parent]
        self.assertEqual(8, len(vfs))
        self.assertEqual([['nvidia-mig-a100d-2-20c']] * 3 +
                         [['nvidia-mig-a100d-1-10c']],
                         [list(f.mdev_types) for f in vfs[:4]])
        facts = next(iter(host.gpus.values()))
        self.assertEqual({'capable': True, 'enabled': True}, facts['mig'])

    def test_type_names_say_their_profile(self):
        # nova-conf's reading of a MIG-backed type name gives the profile
        from gpu_nova_ext.agent import mig_layout
        from gpu_nova_ext.operator import nova_conf_mig
        for value in ('%s:1g.10gb+me=1,1g.20gb=1,3g.40gb=1' % A100,
                      'A30:2g.12gb=1,1g.6gb=2',
                      'H100_80GB_HBM3:4g.40gb=1,2g.20gb=1'):
            layout = mig_layout.parse_layout(value)
            for t in hostgen.mig_types(layout):
                self.assertEqual(t.profile,
                                 nova_conf_mig.profile_of_type(t.name))

    def test_passthrough_and_layout_refused(self):
        data = _data({'gpus': [{'model': A100, 'count': 1,
                                'mode': 'passthrough'}]})
        msg = self.refused(data)
        self.assertIn('hosts[0].mig: GPU model A100_80GB_PCIE is '
                      'whole-GPU passthrough', msg)

    def test_vgpu_keys_follow_from_the_layout(self):
        data = _data({'gpus': [{'model': A100, 'count': 1,
                                'vgpu_type': 'nvidia-471'}]})
        self.assertIn('follows from the MIG layout of A100_80GB_PCIE',
                      self.refused(data))

    def test_layout_of_a_model_the_kind_lacks(self):
        data = _data({'mig': 'A30:4g.24gb=1'})
        self.assertIn('MIG layout of GPU model A30, which this host kind '
                      'has no GPU of', self.refused(data))

    def test_layout_needs_generated_hosts(self):
        data = _data({'gpus': {}, 'libvirt_xml_inline': '<node/>',
                      'nova_gpu_mode': 'none'})
        self.assertIn('a MIG layout needs gpus: as a list',
                      self.refused(data))

    def test_model_without_mig(self):
        data = _data({'gpus': [{'model': 'L40S', 'count': 1}],
                      'mig': 'L40S:1g.10gb=1'})
        msg = self.refused(data)
        self.assertIn('hosts[0].mig', msg)
        self.assertIn('GPU model L40S has no MIG profiles', msg)

    def test_variants(self):
        data = _data(mig_variants={'sevens': {'a100': '%s:1g.10gb=7' % A100}})
        scenario = self.load(data, 'sevens')
        self.assertEqual('sevens', scenario.mig_variant)
        self.assertEqual({A100: '1g.10gb=7'}, scenario.hosts[0].mig_layouts)
        self.assertIn("no MIG variant 'other'",
                      self.refused(data, 'other'))
        bad = _data(mig_variants={'x': {'h100': '%s:1g.10gb=7' % A100}})
        self.assertIn("mig_variants.x.h100: no host kind 'h100'",
                      self.refused(bad))

    def test_power_profiles(self):
        host = self.load(_data({'power': ['%s:efficiency' % A100,
                                          '*:80%']})).hosts[0]
        self.assertEqual({A100: 'efficiency', '*': '80%'},
                         {m: p.name for m, p in host.power_profiles.items()})
        self.assertIn('power profile of GPU model H200, which this host '
                      'kind has no GPU of',
                      self.refused(_data({'power': 'H200:balanced'})))
        msg = self.refused(_data({'power': '%s:turbo' % A100}))
        self.assertIn("hosts[0].power: 'A100_80GB_PCIE:turbo': "
                      'expected one of max-performance', msg)
