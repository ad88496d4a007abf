# SPDX-License-Identifier: Apache-2.0

"""The dev cloud's tempest.conf, how a Tempest run's results are read,
and when the cached Tempest venv is pointed at this checkout again.

The configuration is read back with oslo.config and the plugin's own
option definitions (what Tempest registers for ``[gpu_nova_ext]``).
"""
import configparser
import io
import os
import subprocess
import sys
import tempfile

import fixtures

from oslo_config import cfg
import subunit
import testtools

from gpu_nova_ext.tempest_plugin import config
from gpu_nova_ext_dev.cloud import tempest

INFO = {'keystone_url': 'http://127.0.0.1:35357',
        'admin_password': 's3cret'}
REFS = tempest.CloudRefs(image_id='img-1', flavor_id='fl-1',
                         exclude_flavors=('gpu.a100.as.l4', 'fl-9'))


class TestWriteConf(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.text = tempest.write_conf(INFO, REFS, 'RegionOne')
        self.conf = configparser.ConfigParser(interpolation=None)
        self.conf.read_string(self.text)

    def test_the_cloud_and_its_admin(self):
        c = self.conf
        self.assertEqual('http://127.0.0.1:35357/v3',
                         c['identity']['uri_v3'])
        self.assertEqual('RegionOne', c['identity']['region'])
        self.assertEqual('s3cret', c['auth']['admin_password'])
        self.assertEqual('admin', c['auth']['admin_username'])
        self.assertEqual('True', c['auth']['use_dynamic_credentials'])
        self.assertEqual('img-1', c['compute']['image_ref'])
        self.assertEqual('fl-1', c['compute']['flavor_ref'])

    def test_no_networks_resize_on(self):
        c = self.conf
        self.assertEqual('False', c['service_available']['neutron'])
        self.assertEqual('False', c['auth']['create_isolated_networks'])
        self.assertEqual('False', c['validation']['run_validation'])
        # the dev cloud's servers have disk files and resize on their host
        self.assertEqual('True', c['compute-feature-enabled']['resize'])

    def test_microversions_the_tests_need(self):
        # the plugin's class asks compute 2.37 and placement 1.14
        self.assertEqual('latest', self.conf['compute']['max_microversion'])
        self.assertEqual('latest',
                         self.conf['placement']['max_microversion'])

    def test_plugin_options_read_back(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, 'tempest.conf')
            with open(path, 'w') as f:
                f.write(self.text)
            conf = cfg.ConfigOpts()
            config.register_opts(conf)
            conf([], project='tempest', default_config_files=[path],
                 default_config_dirs=[])
        self.assertEqual(['gpu.a100.as.l4', 'fl-9'],
                         conf.gpu_nova_ext.exclude_flavors)
        self.assertEqual([], conf.gpu_nova_ext.flavors)


def stream(*tests):
    out = io.BytesIO()
    writer = subunit.StreamResultToBytes(out)
    for test_id, status in tests:
        writer.status(test_id=test_id, test_status='inprogress')
        writer.status(test_id=test_id, test_status=status)
    return out.getvalue()


class TestResults(testtools.TestCase):

    def test_statuses(self):
        got = tempest.test_statuses(stream(
            ('x.test_boot(gpu.a)', 'success'),
            ('x.test_resize(gpu.a)', 'skip'),
            ('x.test_boot(gpu.b)', 'fail')))
        self.assertEqual({'x.test_boot(gpu.a)': 'success',
                          'x.test_resize(gpu.a)': 'skip',
                          'x.test_boot(gpu.b)': 'fail'}, got)

    def test_summary(self):
        output = ('noise\n======\nTotals\n======\nRan: 2 tests in 9.0 sec.'
                  '\n - Passed: 2\n')
        self.assertEqual('======\nTotals\n======\nRan: 2 tests in 9.0 '
                         'sec.\n - Passed: 2', tempest.summary_of(output))
        self.assertEqual('b\nc', tempest.summary_of('b\nc\n'))


class TestVenvReuse(testtools.TestCase):
    """A cached venv (real, without pip) is reused only with our plugin."""

    def setUp(self):
        super().setUp()
        cache = self.useFixture(fixtures.TempDir()).path
        self.useFixture(fixtures.EnvironmentVariable(
            'GPU_NOVA_EXT_CACHE', cache))
        self.path = os.path.join(cache, 'tempest',
                                 'venv-%s' % tempest.venv_key())
        subprocess.run([sys.executable, '-m', 'venv', '--without-pip',
                        self.path], check=True)
        open(os.path.join(self.path, '.complete'), 'w').close()
        with open(os.path.join(self.path, '.checkout'), 'w') as f:
            f.write(tempest.TOP + '\n')
        self.pip = []
        self.useFixture(fixtures.MonkeyPatch(
            'gpu_nova_ext_dev.cloud.tempest._run',
            lambda argv, what, **kw: self.pip.append(argv)))

    def site_packages(self) -> str:
        return subprocess.run(
            [os.path.join(self.path, 'bin', 'python'), '-c',
             'import sysconfig; print(sysconfig.get_paths()["purelib"])'],
            check=True, capture_output=True, text=True).stdout.strip()

    def test_venv_without_the_plugin_is_installed_again(self):
        # this checkout's venv whose plugin metadata went (the legacy
        # editable install kept it in the checkout's egg-info)
        self.assertFalse(tempest._plugin_installed(self.path))
        self.assertEqual(self.path, tempest.venv())
        self.assertEqual(1, len(self.pip))
        argv = self.pip[0]
        # the PEP 660 way: the metadata goes into the venv
        self.assertEqual(['--use-pep517', '-e', tempest.TOP], argv[-3:])

    def test_venv_with_the_plugin_is_kept(self):
        info = os.path.join(self.site_packages(),
                            'gpu_nova_ext-1.0.dist-info')
        os.makedirs(info)
        with open(os.path.join(info, 'METADATA'), 'w') as f:
            f.write('Metadata-Version: 2.1\nName: gpu-nova-ext\n'
                    'Version: 1.0\n')
        with open(os.path.join(info, 'entry_points.txt'), 'w') as f:
            f.write('[tempest.test_plugins]\ngpu-nova-ext = '
                    'gpu_nova_ext.tempest_plugin.plugin:'
                    'GpuNovaExtTempestPlugin\n')
        self.assertTrue(tempest._plugin_installed(self.path))
        self.assertEqual(self.path, tempest.venv())
        self.assertEqual([], self.pip)
