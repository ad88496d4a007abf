# SPDX-License-Identifier: Apache-2.0

"""gpu-nova-ext deploy-config: who reads which option, in each tool's files.

(tools/check-deploy-configs renders the files with the tools' own code.)
"""
import contextlib
import io
import os

import fixtures
import testtools
import yaml

from gpu_nova_ext.cmd import cli
from gpu_nova_ext import exception
from gpu_nova_ext.operator import deploy_config
from gpu_nova_ext.operator import nova_conf

ALIAS = ('{"name":"gpu-h100-80gb-hbm3","vendor_id":"10de",'
         '"product_id":"2330","resource_class":"CUSTOM_GPU_H100_80GB_HBM3"}')
SPEC = '{"vendor_id":"10de","product_id":"2330","address":"0000:1b:00.0"}'
SPEC2 = '{"vendor_id":"10de","product_id":"2330","address":"0000:9c:00.0"}'
PT = """# nova.conf drop-in for GPU host pt.
# NOTE: GPU 0000:9c:00.0 is unhealthy.

[pci]
device_spec = %s
device_spec = %s
report_in_placement = True
alias = %s
""" % (SPEC, SPEC2, ALIAS)
VGPU = """[devices]
enabled_mdev_types = nvidia-472

[mdev_nvidia-472]
device_addresses = 0000:3b:00.0,0000:86:00.0
mdev_class = CUSTOM_VGPU_A100_80GB_PCIE
"""


class TestDeployConfig(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def write(self, name, text):
        path = os.path.join(self.tmp, name)
        with open(path, 'w') as f:
            f.write(text)
        return path

    def deployment(self, **files):
        options, notes = {}, {}
        for host, text in files.items():
            options[host], notes[host] = deploy_config.read_drop_in(
                self.write(host + '.conf', text))
        return deploy_config.deployment(options, notes)

    def test_each_option_goes_to_who_reads_it(self):
        dep = self.deployment(pt=PT, vgpu=VGPU)
        self.assertEqual([('pci', 'alias', ALIAS),
                          ('filter_scheduler', 'pci_in_placement', 'True')],
                         dep.common)
        scheduler = {(s, o) for s, o, _ in dep.scheduler}
        self.assertIn(('filter_scheduler', 'enabled_filters'), scheduler)
        self.assertIn(('scheduler', 'max_placement_results'), scheduler)
        enabled = dict((o, v) for s, o, v in dep.scheduler)[
            'enabled_filters'].split(',')
        self.assertIn(nova_conf.PCI_FILTER, enabled)
        self.assertEqual([('pci', 'device_spec', SPEC),
                          ('pci', 'device_spec', SPEC2),
                          ('pci', 'report_in_placement', 'True')],
                         dep.hosts['pt'])
        self.assertEqual('mdev_nvidia-472', dep.hosts['vgpu'][1][0])
        self.assertEqual(['pt: GPU 0000:9c:00.0 is unhealthy.'], dep.notes)

    def test_vgpu_only_cloud_needs_no_pci_filter(self):
        dep = self.deployment(vgpu=VGPU)
        enabled = dict((o, v) for s, o, v in dep.scheduler)[
            'enabled_filters'].split(',')
        self.assertNotIn(nova_conf.PCI_FILTER, enabled)
        self.assertEqual([('filter_scheduler', 'pci_in_placement', 'True')],
                         dep.common)

    def test_scheduler_sections_of_a_host_are_left_out_and_said(self):
        dep = self.deployment(
            pt=PT + '\n[filter_scheduler]\nenabled_filters = Foo\n')
        self.assertNotIn('filter_scheduler',
                         [s for s, _, _ in dep.hosts['pt']])
        self.assertIn('pt: [filter_scheduler] enabled_filters left out',
                      '\n'.join(dep.notes))

    def test_one_alias_defined_two_ways_is_refused(self):
        other = PT.replace('"product_id":"2330","resource_class"',
                           '"product_id":"2331","resource_class"')
        exc = self.assertRaises(exception.InvalidArgument, self.deployment,
                                a=PT, b=other)
        self.assertIn('hosts a and b define it differently', str(exc))

    def test_hosts_disagreeing_on_pci_in_placement_are_refused(self):
        exc = self.assertRaises(
            exception.InvalidArgument, self.deployment, a=PT,
            b=PT.replace('report_in_placement = True',
                         'report_in_placement = False'))
        self.assertIn('False on b, True on a', str(exc))

    def test_kolla_files(self):
        files = deploy_config.kolla_ansible(self.deployment(pt=PT,
                                                            vgpu=VGPU))
        self.assertEqual({'nova.conf', 'nova/nova-scheduler.conf',
                          'nova/pt/nova.conf', 'nova/vgpu/nova.conf'},
                         set(files))
        self.assertIn('device_spec = %s\ndevice_spec = %s\n' % (SPEC, SPEC2),
                      files['nova/pt/nova.conf'])
        self.assertNotIn('device_spec', files['nova.conf'])

    def test_openstack_ansible_writes_whole_overrides_outside_user_vars(self):
        files = deploy_config.openstack_ansible(self.deployment(pt=PT,
                                                                vgpu=VGPU))
        self.assertFalse([p for p in files if 'user_' in p])
        host = yaml.safe_load(files['host_vars/pt.yml'])[
            'nova_nova_conf_overrides']
        # the host's own options and the common ones: Ansible replaces
        # the group's dictionary with the host's
        self.assertEqual({ALIAS: None}, {host['pci']['alias']: None})
        self.assertEqual({SPEC: None, SPEC2: None},
                         host['pci']['device_spec'])
        self.assertEqual('True',
                         host['filter_scheduler']['pci_in_placement'])
        for group in deploy_config.OSA_CONTROL_GROUPS:
            control = yaml.safe_load(files['group_vars/%s.yml' % group])[
                'nova_nova_conf_overrides']
            self.assertEqual(dict.fromkeys(nova_conf.AVAILABLE_FILTERS),
                             control['filter_scheduler']['available_filters'])
            self.assertNotIn('device_spec', control['pci'])

    def test_openstack_helm_values(self):
        values = yaml.safe_load(deploy_config.openstack_helm(
            self.deployment(pt=PT, vgpu=VGPU))['nova-gpu-values.yaml'])
        conf = values['conf']
        self.assertEqual({'type': 'multistring',
                          'values': list(nova_conf.AVAILABLE_FILTERS)},
                         conf['nova']['filter_scheduler'][
                             'available_filters'])
        hosts = {h['name']: h['conf']['nova']
                 for h in conf['overrides']['nova_compute']['hosts']}
        self.assertEqual({'type': 'multistring', 'values': [SPEC, SPEC2]},
                         hosts['pt']['pci']['device_spec'])
        self.assertEqual('nvidia-472',
                         hosts['vgpu']['devices']['enabled_mdev_types'])

    def _cli(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', '/dev/null', 'deploy-config']
                          + list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_cli_writes_the_files_and_says_the_notes(self):
        out_dir = os.path.join(self.tmp, 'kolla')
        rc, _, err = self._cli('--tool', 'kolla-ansible', '--output',
                               out_dir, self.write('pt.conf', PT))
        self.assertEqual(0, rc, err)
        with open(os.path.join(out_dir, 'nova', 'pt', 'nova.conf')) as f:
            self.assertIn(SPEC2, f.read())
        self.assertIn('NOTE: pt: GPU 0000:9c:00.0 is unhealthy.', err)

    def test_cli_bad_drop_in_is_one_line_exit_2(self):
        for text in ('[pci\nalias = x\n', '[pci]\nalias = {not json\n'):
            rc, _, err = self._cli('--tool', 'openstack-helm',
                                   self.write('bad.conf', text))
            self.assertEqual(2, rc, err)
            lines = err.strip().splitlines()
            self.assertEqual(1, len(lines), lines)
            self.assertNotIn('Traceback', err)
        rc, _, err = self._cli('--tool', 'openstack-helm',
                               os.path.join(self.tmp, 'missing.conf'))
        self.assertEqual(2, rc)
        self.assertIn('No such file', err)
