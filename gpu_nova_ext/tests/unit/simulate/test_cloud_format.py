# SPDX-License-Identifier: Apache-2.0

"""The scenario format for real clouds: host kinds, generated host XML,
deletes, lifetimes, agent events, the workload, policies, safety."""
import copy
import os
import tempfile

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.simulate import host_xml
from gpu_nova_ext.simulate import hostgen
from gpu_nova_ext.simulate import policies
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.simulate import steps

BASE = {
    'hosts': [
        {'name': 'a100', 'count': 3,
         'gpus': [{'model': 'A100_80GB_PCIE', 'count': 2, 'mode': 'vgpu',
                   'vgpu_type': 'nvidia-471', 'vgpu_name': 'A100D-10C'}]},
        {'name': 'mi210', 'count': 2,
         'gpus': [{'model': 'MI210', 'count': 4}]},
        {'name': 'a10',
         'gpus': [{'model': 'A10', 'count': 1, 'mode': 'vgpu-vfio',
                   'vgpu_type': 'nvidia-593', 'vgpu_instances': 6}]},
    ],
    'flavors': [{'name': 'small', 'vcpus': 2, 'ram_mb': 4096,
                 'extra_specs': {'resources:VGPU': '1'}}],
    'boots': [{'flavor': 'small', 'count': 2, 'lifetime': 5},
              {'delete': 'small-1'},
              {'event': {'host': 'a100-0002', 'agent': 'down'}}],
    'workload': {'flavors': {'small': 2}, 'seed': 4,
                 'lifetime': {'min': 2, 'max': 9},
                 'until': {'arrived_pct': 130}},
}
PATH = '/tmp/cloud-under-test.yaml'


class TestCloudFormat(testtools.TestCase):

    def _data(self):
        return copy.deepcopy(BASE)

    def assertError(self, data, entry, *words):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        self.assertIn(entry, str(exc))
        for word in words:
            self.assertIn(word, str(exc))

    def test_host_kinds_and_generated_xml(self):
        s = scn.from_dict(self._data(), PATH)
        names = [h.name for h in s.hosts]
        self.assertEqual(['a100-0001', 'a100-0002', 'a100-0003',
                          'mi210-0001', 'mi210-0002', 'a10'], names)
        a100 = s.host('a100-0003')
        # the XML of a kind is parsed once and shared
        self.assertIs(s.host('a100-0001').pci_functions, a100.pci_functions)
        self.assertEqual('vgpu', a100.nova_gpu_mode)
        self.assertEqual(['nvidia-471'], a100.enabled_mdev_types)
        self.assertEqual(2, len(a100.pci_functions))
        func = a100.pci_functions[0]
        self.assertEqual(('10de', '20b5'), (func.vendor_id, func.product_id))
        self.assertEqual(['nvidia-471'], func.mdev_types)
        facts = a100.gpus[func.address]
        self.assertEqual([{'id': 'nvidia-471', 'name': 'A100D-10C',
                           'max': 8}], facts['vgpu_types'])
        mi210 = s.host('mi210-0001')
        self.assertEqual('pci', mi210.nova_gpu_mode)
        self.assertEqual({('1002', '740f')}, {
            (f.vendor_id, f.product_id) for f in mi210.pci_functions})
        # SR-IOV: a PF and one VF per vGPU, each VF an mdev parent
        a10 = s.host('a10')
        pf, *vfs = a10.pci_functions
        self.assertEqual(6, len(vfs))
        self.assertEqual({pf.address}, {vf.parent for vf in vfs})
        self.assertEqual([['nvidia-593']] * 6, [vf.mdev_types for vf in vfs])

    def test_steps_and_workload(self):
        s = scn.from_dict(self._data(), PATH)
        boot, delete, event = s.steps
        self.assertEqual(5, boot.lifetime)
        self.assertEqual(steps.Delete('small-1', index=1), delete)
        self.assertEqual(('a100-0002', 'down', None),
                         (event.host, event.agent, event.gpu))
        work = s.workload
        self.assertEqual(({'small': 2.0}, 4, (2, 9), 'arrived_pct', 130.0),
                         (work.flavors, work.seed, work.lifetime, work.until,
                          work.arrived_pct))

    def test_unsafe_names_refused(self):
        for bad in ('../../etc', 'a/b', 'x\ny = 1', '', '.hidden',
                    'a' * 64, 'h%(x)s'):
            data = self._data()
            data['hosts'][2]['name'] = bad
            self.assertError(data, 'hosts[2]')
        data = self._data()
        data['hosts'][0]['name'] = 'a' * 58      # + "-0001" is 63
        data['boots'][2]['event']['host'] = 'a' * 58 + '-0002'
        scn.from_dict(data, PATH)
        data['hosts'][0]['name'] = 'a' * 59
        self.assertError(data, 'hosts[0].name', 'too long for 3 hosts',
                         'at most 58')
        data = self._data()
        data['flavors'][0]['name'] = 'm1/../../x'
        self.assertError(data, 'flavors[0].name', 'not a safe name')
        data = self._data()
        data['boots'][0]['name'] = 'srv\n'
        self.assertError(data, 'boots[0].name', 'not a safe name')

    def test_bad_numbers_refused_naming_the_entry(self):
        cases = [
            (('hosts', 0, 'cpu_allocation_ratio'), float('nan'),
             'cpu_allocation_ratio', 'finite'),
            (('hosts', 0, 'ram_allocation_ratio'), float('inf'),
             'ram_allocation_ratio', 'finite'),
            (('hosts', 0, 'disk_allocation_ratio'), -1.0,
             'disk_allocation_ratio', 'above 0'),
            (('hosts', 0, 'count'), -2, 'count', 'at least 1'),
            (('hosts', 0, 'memory_mb'), 0, 'memory_mb', 'at least 1'),
            (('workload', 'flavors', 'small'), float('nan'),
             'workload.flavors.small', 'finite'),
            (('workload', 'flavors', 'small'), 0, 'workload.flavors.small',
             'above 0'),
            (('boots', 0, 'lifetime'), 0, 'boots[0].lifetime', 'at least'),
        ]
        for path, value, entry, word in cases:
            data = self._data()
            target = data
            for key in path[:-1]:
                target = target[key]
            target[path[-1]] = value
            self.assertError(data, entry, word)
        data = self._data()
        data['nova_conf'] = {'gpu_weights': {
            'packing_weight_multiplier': float('-inf')}}
        self.assertError(data, 'nova_conf.gpu_weights', 'finite')
        data = self._data()
        data['hosts'][0]['gpus'][0]['metrics'] = {'power_w': float('nan')}
        self.assertError(data, 'metrics.power_w', 'finite')

    def test_gpu_kind_mistakes(self):
        data = self._data()
        data['hosts'][0]['gpus'][0]['model'] = 'A1000000'
        self.assertError(data, 'hosts[0].gpus[0].model:',
                         "'A1000000' is not one of", 'A100_80GB_PCIE')
        data = self._data()
        data['hosts'][1]['gpus'][0].update(mode='vgpu',
                                           vgpu_type='nvidia-1')
        self.assertError(data, 'gpus[0].mode', 'NVIDIA')
        data = self._data()
        del data['hosts'][0]['gpus'][0]['vgpu_name']
        self.assertError(data, 'gpus[0]', 'vgpu_instances')
        data = self._data()
        data['hosts'][0]['gpus'].append({'model': 'H100_PCIE', 'count': 1})
        self.assertError(data, 'hosts[0].gpus:', 'two host kinds')
        data = self._data()
        data['hosts'][0]['libvirt_xml_inline'] = '<node/>'
        self.assertError(data, 'hosts[0].libvirt_xml_inline:',
                         'follows from gpus: as a list', 'remove it')

    def test_gpu_addresses(self):
        data = self._data()
        data['hosts'][1]['gpus'][0]['addresses'] = [
            '0000:81:00.0', '0000:82:00.0', '0000:c1:00.0', 'c2:00.0']
        data['hosts'][1]['gpus'][0]['nvlink'] = 'pairs'
        host = scn.from_dict(data, PATH).host('mi210-0002')
        self.assertEqual(['0000:81:00.0', '0000:82:00.0', '0000:c1:00.0',
                          '0000:c2:00.0'], sorted(host.gpus))
        # NVLink pairs are the kind's GPUs by position, at their addresses
        self.assertEqual({'0000:82:00.0': 12},
                         host.gpus['0000:81:00.0']['nvlink_peers'])
        data['hosts'][1]['gpus'][0]['addresses'].pop()
        self.assertError(data, 'hosts[1].gpus[0].addresses:',
                         '3 addresses for 4 GPUs')
        data = self._data()
        data['hosts'][2]['gpus'][0]['addresses'] = ['0000:81:00.0']
        self.assertError(data, 'hosts[2].gpus[0].addresses:',
                         'vgpu-vfio', 'drop addresses:')
        data = self._data()
        # a kind's address on the simulator's layout of another kind
        first = sorted(scn.from_dict(data, PATH).host('mi210-0001').gpus)[0]
        data['hosts'][1]['gpus'].append({'model': 'MI210', 'count': 1,
                                         'addresses': [first]})
        self.assertError(data, 'hosts[1].gpus:', 'two devices at PCI '
                         'address %s' % first, 'distinct addresses:')

    def test_workload_and_events_mistakes(self):
        data = self._data()
        data['workload']['until'] = 'forever'
        self.assertError(data, 'workload.until', 'first_failure')
        data = self._data()
        data['workload']['flavors'] = {'big': 1}
        self.assertError(data, 'workload.flavors.big', 'unknown flavor')
        data = self._data()
        data['boots'][2]['event']['agent'] = 'sideways'
        self.assertError(data, 'boots[2].event.agent', 'down, up')
        data = self._data()
        data['boots'] = []
        del data['workload']
        self.assertError(data, 'boots:', 'at least 1',
                         'a workload: generator')


class TestHostGen(testtools.TestCase):

    def test_xml_round_trips_through_the_parser(self):
        spec = hostgen.GpuSpec(model='H100_80GB_HBM3', count=3,
                               mode='passthrough')
        gen = hostgen.generate([spec])
        funcs = host_xml.parse(gen.xml_text)
        self.assertEqual(3, len(funcs))
        self.assertTrue(all(f.is_gpu for f in funcs))
        self.assertEqual(sorted(gen.facts), [f.address for f in funcs])
        self.assertEqual(81559, gen.facts[funcs[0].address]['memory_mib'])
        self.assertEqual('pci', gen.nova_gpu_mode)

    def test_instances_from_framebuffer(self):
        spec = hostgen.GpuSpec(model='A100_80GB_PCIE', count=1,
                               mode='vgpu', vgpu_type='nvidia-472',
                               vgpu_name='A100D-20C')
        self.assertEqual(4, spec.instances())


class TestPolicies(testtools.TestCase):

    def test_presets_inline_and_file(self):
        self.assertEqual(('spread', policies.PRESETS['spread'], True),
                         policies.parse('spread'))
        name, overrides, ours = policies.parse('nova')
        self.assertEqual(('nova', {}, False), (name, overrides, ours))
        self.assertEqual(
            ('hot', {'gpu_weights': {'thermal_weight_multiplier': 5.0},
                     'gpu_scheduler': {'intra_host_policy': 'coolest'}},
             True),
            policies.parse('hot=gpu_weights.thermal_weight_multiplier=5.0,'
                           'gpu_scheduler.intra_host_policy=coolest'))
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            f.write('gpu_weights:\n  packing_weight_multiplier: 3\n')
        self.addCleanup(os.unlink, f.name)
        self.assertEqual(('mine', {'gpu_weights': {
            'packing_weight_multiplier': 3}}, True),
            policies.parse('mine=' + f.name))

    def test_bad_arguments(self):
        for bad in ('nosuchpreset', '../x=a.b=1', 'p=nodot=1',
                    'p=a.b=[1, 2'):
            self.assertRaises(policies.PolicyError, policies.parse, bad)

    def test_apply_keeps_the_scenario(self):
        s = scn.from_dict(copy.deepcopy(BASE), PATH)
        s.nova_conf = {'gpu_weights': {'thermal_weight_multiplier': 1.0}}
        p = policies.apply(s, {'gpu_weights': {
            'packing_weight_multiplier': 10.0}}, False)
        self.assertEqual({'thermal_weight_multiplier': 1.0,
                          'packing_weight_multiplier': 10.0},
                         p.nova_conf['gpu_weights'])
        self.assertEqual({'thermal_weight_multiplier': 1.0},
                         s.nova_conf['gpu_weights'])
        self.assertFalse(p.gpu_plugins)
        self.assertTrue(s.gpu_plugins)
        self.assertIs(s.hosts, p.hosts)


def run_cli(argv):
    """``gpu-nova-ext ARGV`` in this process: (exit code, stdout, stderr)."""
    import contextlib
    import io

    from gpu_nova_ext.cmd import cli
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(argv)
    return rc, out.getvalue(), err.getvalue()


class TestCommandLine(testtools.TestCase):

    def _cli(self, argv):
        return run_cli(argv)

    def test_plot_without_matplotlib_is_one_line(self):
        from unittest import mock
        with mock.patch.dict('sys.modules', {'matplotlib': None}):
            rc, out, err = self._cli(['simulate', '--plot', '/tmp/x.png'])
        self.assertEqual(2, rc)
        self.assertEqual('', out)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn('gpu-nova-ext[plot]', err)

    def test_bad_compare_is_one_line(self):
        rc, out, err = self._cli(['simulate', '--compare', 'pack',
                                  'bogus'])
        self.assertEqual(2, rc)
        self.assertIn("no preset of that name", err)
        self.assertNotIn('Traceback', err)

    def test_yaml_bomb_refused(self):
        text = 'a: &a ["x","x","x","x","x","x","x","x","x","x"]\n'
        prev = 'a'
        for name in 'bcdefghij':
            text += '%s: &%s [%s]\n' % (name, name,
                                        ','.join(['*' + prev] * 10))
            prev = name
        text += 'description: *j\n'
        with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                         delete=False) as f:
            f.write(text)
        self.addCleanup(os.unlink, f.name)
        rc, out, err = self._cli(['simulate', f.name])
        self.assertEqual(2, rc)
        self.assertIn('alias bomb', err)
        self.assertIn(f.name, err)
