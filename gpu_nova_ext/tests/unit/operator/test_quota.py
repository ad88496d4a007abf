# SPDX-License-Identifier: Apache-2.0

"""GPU quota per model: the classes a model names, limits, bad input."""
import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import flavor
from gpu_nova_ext.operator import nova_conf
from gpu_nova_ext.operator import quota
from gpu_nova_ext.tests.functional import osc_client

PLACEMENT_CLASSES = [
    'VCPU', 'MEMORY_MB', 'VGPU', 'CUSTOM_PCI_10DE_20B5',
    'CUSTOM_GPU_A100_80GB_PCIE', 'CUSTOM_GPU_A100_40GB_SXM4',
    'CUSTOM_VGPU_A100_80GB_PCIE', 'CUSTOM_GPU_L4', 'CUSTOM_GPU_TESLA_T4',
    'CUSTOM_GPU_VGPU_L40S_12Q', 'CUSTOM_VGPU_']


class TestClasses(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.classes = quota.gpu_classes(PLACEMENT_CLASSES)

    def test_classify_the_classes_we_write(self):
        # the classes nova-conf and flavor create name read back
        for rc, kind, model in (
                (nova_conf.pci_resource_class('NVIDIA L4'),
                 quota.PASSTHROUGH, 'L4'),
                (nova_conf.mdev_resource_class('NVIDIA A100 80GB PCIe'),
                 quota.VGPU, 'A100_80GB_PCIE'),
                (nova_conf.vgpu_resource_class('L40S-12Q'),
                 quota.VGPU_VFIO, 'L40S_12Q')):
            self.assertEqual(quota.GpuClass(rc, kind, model),
                             quota.classify(rc))
        for rc in ('VGPU', 'VCPU', 'CUSTOM_PCI_10DE_20B5', 'CUSTOM_VGPU_'):
            self.assertIsNone(quota.classify(rc))
        self.assertEqual(6, len(self.classes))
        self.assertEqual('class:CUSTOM_GPU_L4',
                         quota.classify('CUSTOM_GPU_L4').resource_name)

    def test_flavor_quota_class_is_classified_by_model(self):
        req = flavor.GpuFlavorRequest(model='A100_80GB_PCIE')
        self.assertEqual(
            quota.GpuClass(flavor.quota_class(req), quota.VGPU,
                           'A100_80GB_PCIE'),
            quota.classify(flavor.quota_class(req)))

    def names(self, model, kind=None):
        return [c.resource_class
                for c in quota.resolve_model(model, self.classes, kind)]

    def test_prefix_matches_every_model_and_kind(self):
        self.assertEqual(['CUSTOM_GPU_A100_40GB_SXM4',
                          'CUSTOM_GPU_A100_80GB_PCIE',
                          'CUSTOM_VGPU_A100_80GB_PCIE'], self.names('A100'))
        self.assertEqual(['CUSTOM_VGPU_A100_80GB_PCIE'],
                         self.names('A100', quota.VGPU))

    def test_exact_model_and_class_win(self):
        self.assertEqual(['CUSTOM_GPU_A100_80GB_PCIE',
                          'CUSTOM_VGPU_A100_80GB_PCIE'],
                         self.names('NVIDIA A100 80GB PCIe'))
        self.assertEqual(['CUSTOM_GPU_A100_80GB_PCIE'],
                         self.names('custom_gpu_a100_80gb_pcie'))
        # brand words are optional, as in gpu:model
        self.assertEqual(['CUSTOM_GPU_TESLA_T4'], self.names('T4'))
        # a prefix only at a _ boundary
        self.assertRaises(exception.InvalidArgument, self.names, 'A10')

    def test_unknown_model_names_the_known(self):
        exc = self.assertRaises(exception.InvalidArgument, self.names,
                                'H100', quota.VGPU)
        self.assertEqual(
            "No GPU resource class in Placement matches model 'H100' "
            "(vgpu); known: A100_80GB_PCIE (vgpu). Give one of those, or "
            "configure the hosts first (gpu-nova-ext nova-conf writes the "
            "per-model classes).", str(exc))


class TestLimits(testtools.TestCase):

    def test_parse_limit(self):
        self.assertEqual(4, quota.parse_limit('4'))
        self.assertEqual(-1, quota.parse_limit(' -1 '))
        self.assertEqual(0, quota.parse_limit('0'))
        self.assertEqual(quota.MAX_LIMIT, quota.parse_limit('2147483647'))
        for bad in ('-2', 'four', '4.5', '2147483648', ''):
            exc = self.assertRaises(exception.InvalidArgument,
                                    quota.parse_limit, bad)
            self.assertIn('Invalid --limit %r' % bad, str(exc))

    def test_row_takes_project_then_default(self):
        gpu = quota.classify('CUSTOM_GPU_L4')
        self.assertEqual(('project', 2),
                         (quota.row('p', gpu, 2, 8, 0).source,
                          quota.row('p', gpu, 2, 8, 0).limit))
        self.assertEqual('default', quota.row('p', gpu, None, 8, 0).source)
        r = quota.row('p', gpu, None, None, 3)
        self.assertEqual(('none', None, 0), (r.source, r.limit, r.over))

    def test_overage(self):
        gpu = quota.classify('CUSTOM_GPU_A100_80GB_PCIE')
        r = quota.row('p', gpu, 1, None, 3)
        self.assertEqual(2, r.over)
        self.assertEqual(0, quota.row('p', gpu, -1, None, 3).over)
        self.assertEqual(0, quota.row('p', gpu, 4, None, 3).over)
        self.assertIn('project p uses 3 of class:CUSTOM_GPU_A100_80GB_PCIE, '
                      '2 above its limit 1', quota.overage_line(r))


class TestCli(testtools.TestCase):
    """openstack gpu quota: bad input refused before any service call."""

    def setUp(self):
        super().setUp()
        self.useFixture(osc_client.Cloud('http://127.0.0.1:1/placement'))

    def run_cli(self, argv):
        rc, out, err = osc_client.openstack('gpu', *argv)
        return rc, err

    def test_bad_limit_is_one_line(self):
        rc, err = self.run_cli(['quota', 'set', '--project', 'p', '--model',
                                'A100', '--limit', 'lots'])
        self.assertEqual(2, rc)
        self.assertIn("Invalid --limit 'lots'", err)
        self.assertEqual(1, len(err.strip().splitlines()), err)

    def test_project_or_default(self):
        rc, err = self.run_cli(['quota', 'set', '--project', 'p',
                                '--default', '--model', 'A100',
                                '--limit', '4'])
        self.assertEqual(2, rc)
        self.assertIn('not allowed with argument', err)
        rc, err = self.run_cli(['quota', 'unset', '--model', 'A100'])
        self.assertEqual(2, rc)
        self.assertIn('one of the arguments --project --default is '
                      'required', err)
