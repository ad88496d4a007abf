# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext nova-conf`` on real discovery: libvirt's test driver
(the simulator's shipped host XMLs) and the simulated NVML facts, the
drop-in parsed back with Nova's own options."""
import contextlib
import io
import json
import os
import shutil
import tempfile

import nova.conf.devices
import nova.conf.pci
import nova.conf.scheduler
from oslo_config import cfg
from oslotest import base
from placement import conf as placement_conf
import yaml

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.operator import scale_settings

SCENARIOS = os.path.join(os.path.dirname(__file__), '..', '..', '..',
                         'simulate', 'scenarios')


class TestNovaConfCommand(base.BaseTestCase):

    def setUp(self):
        super().setUp()
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp, True)
        with open(os.path.join(SCENARIOS, 'default.yaml')) as f:
            self.hosts = {h['name']: h for h in yaml.safe_load(f)['hosts']}

    def _run(self, host, *extra, conf_text=''):
        gpus = os.path.join(self.tmp, host + '.yaml')
        with open(gpus, 'w') as f:
            yaml.safe_dump(self.hosts[host]['gpus'], f)
        conf = os.path.join(self.tmp, host + '.conf')
        with open(conf, 'w') as f:
            f.write('[DEFAULT]\nhost = %s\nuse_stderr = true\n'
                    '[agent]\ninventory_sources = libvirt,simulated\n'
                    'simulated_gpus_file = %s\n'
                    'nova_config_file = %s/none.conf\n'
                    'nova_config_dir = %s/none.d\n'
                    % (host, gpus, self.tmp, self.tmp) + conf_text)
        out = os.path.join(self.tmp, host + '-nova.conf')
        uri = 'test://%s' % os.path.abspath(
            os.path.join(SCENARIOS, 'hosts', host + '.xml'))
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', conf, 'nova-conf',
                           '--libvirt-uri', uri, '--output', out]
                          + list(extra))
        self.assertEqual(0, rc, err.getvalue())
        self.assertIn('Wrote %s' % out, err.getvalue())
        nconf = cfg.ConfigOpts()
        nova.conf.pci.register_opts(nconf)
        nova.conf.devices.register_opts(nconf)
        nova.conf.scheduler.register_opts(nconf)
        nconf(['--config-file', out], default_config_files=[],
              default_config_dirs=[])
        nova.conf.devices.register_dynamic_opts(nconf)
        return nconf

    def test_passthrough_host(self):
        conf = self._run('cmp-h100')
        specs = [json.loads(s) for s in conf.pci.device_spec]
        self.assertEqual(sorted(self.hosts['cmp-h100']['gpus']),
                         sorted(s['address'] for s in specs))
        for spec in specs:
            self.assertEqual('CUSTOM_GPU_H100_80GB_HBM3',
                             spec['resource_class'])
            self.assertIn('CUSTOM_GPU_CUDA_CC_9_0', spec['traits'])
            self.assertIn('CUSTOM_GPU_DRIVER_550', spec['traits'])
        self.assertEqual(['gpu-h100-80gb-hbm3'],
                         [json.loads(a)['name'] for a in conf.pci.alias])
        self.assertIn('GpuModelFilter', conf.filter_scheduler.enabled_filters)
        # what keeps packing right at scale, as Nova reads it
        self.assertEqual(scale_settings.CANDIDATES,
                         conf.scheduler.max_placement_results)
        with open(os.path.join(self.tmp, 'cmp-h100-nova.conf')) as f:
            text = f.read()
        self.assertIn('# The same number as Placement\'s', text)

    def test_placement_conf(self):
        out = os.path.join(self.tmp, 'placement.conf')
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            rc = cli.main(['nova-conf', '--placement-conf', '--output',
                           out])
        self.assertEqual(0, rc, err.getvalue())
        # read back with Placement's own option definitions
        pconf = cfg.ConfigOpts()
        placement_conf.register_opts(pconf)
        pconf.set_override('connection', 'sqlite://',
                           group='placement_database')
        pconf(['--config-file', out], default_config_files=[],
              default_config_dirs=[])
        self.assertEqual(
            ('breadth-first', scale_settings.CANDIDATES, True),
            (pconf.placement.allocation_candidates_generation_strategy,
             pconf.placement.max_allocation_candidates,
             pconf.workarounds.optimize_for_wide_provider_trees))
        with open(out) as f:
            self.assertIn('# Round-robin over hosts', f.read())

    def test_mig_layouts_of_this_host_and_its_aggregates(self):
        def drop_in(mig_conf):
            self._run('cmp-a100', '--no-scheduler',
                      conf_text='[mig]\n' + mig_conf)
            with open(os.path.join(self.tmp, 'cmp-a100-nova.conf')) as f:
                return f.read()

        not_applied = 'its MIG layout is not applied yet'
        # another host's layout is not this host's
        self.assertNotIn(not_applied, drop_in(
            'host_layouts = other-host:A100_80GB_PCIE:3g.40gb=2\n'))
        # this host's is (the A100s are not laid out yet: they keep their
        # current type, and the drop-in says so)
        self.assertIn(not_applied, drop_in(
            'host_layouts = cmp-a100:A100_80GB_PCIE:1g.10gb=7\n'))
        # a layout only an aggregate gives is said, not guessed: nova-conf
        # reads no Placement
        text = drop_in('aggregate_layouts = 6f1c7a3e-0d2b-4f5a-9c8e-'
                       '1b2d3e4f5a6b:A100_80GB_PCIE:1g.10gb=7\n')
        self.assertIn('GPU model A100_80GB_PCIE: not written from a MIG '
                      'layout', text)
        self.assertNotIn(not_applied, text)

    def test_vgpu_host_with_type_choice(self):
        conf = self._run('cmp-l4t4', '--no-scheduler',
                         '--vgpu-type', 'nvidia-901',
                         '--vgpu-type', 'nvidia-230')
        self.assertEqual(['nvidia-901', 'nvidia-230'],
                         conf.devices.enabled_mdev_types)
        self.assertEqual(['0000:17:00.0', '0000:65:00.0'],
                         conf['mdev_nvidia-901'].device_addresses)
        self.assertEqual(['0000:ca:00.0'],
                         conf['mdev_nvidia-230'].device_addresses)
        self.assertEqual([], conf.pci.device_spec)
        # --no-scheduler: Nova's default filters stay
        self.assertNotIn('GpuModelFilter',
                         conf.filter_scheduler.enabled_filters)
