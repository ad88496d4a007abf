# SPDX-License-Identifier: Apache-2.0

"""The scenario key ``quotas:`` end to end (issue 20): Nova's own
unified-limits check (``nova.limit.placement``) with oslo.limit's Enforcer,
usages from the embedded Placement, before each boot is scheduled."""
import copy
import json

import testtools

from gpu_nova_ext.tests.functional.simulate import cli

PASSTHROUGH = {
    'description': 'team-a may use 4 A100s; every project 1 L4',
    'nova_conf': {'pci': {'alias': [
        {'name': 'a100', 'resource_class': 'CUSTOM_GPU_A100_80GB_PCIE',
         'device_type': 'type-PCI'},
        {'name': 'l4', 'resource_class': 'CUSTOM_GPU_L4',
         'device_type': 'type-PCI'}]}},
    'quotas': [{'project': 'team-a', 'model': 'A100', 'limit': 4},
               {'model': 'L4', 'limit': 1}],
    'hosts': [
        {'name': 'cmp-a100',
         'pci_resource_class': 'CUSTOM_GPU_A100_80GB_PCIE',
         'gpus': [{'model': 'A100_80GB_PCIE', 'count': 5,
                   'mode': 'passthrough'}]},
        {'name': 'cmp-l4', 'pci_resource_class': 'CUSTOM_GPU_L4',
         'gpus': [{'model': 'L4', 'count': 3, 'mode': 'passthrough'}]}],
    'flavors': [
        {'name': 'pt.a100', 'vcpus': 8, 'ram_mb': 16384,
         'extra_specs': {'pci_passthrough:alias': 'a100:1'}},
        {'name': 'pt.l4', 'vcpus': 4, 'ram_mb': 8192,
         'extra_specs': {'pci_passthrough:alias': 'l4:1'}}],
    'boots': [{'flavor': 'pt.a100', 'count': 5, 'project': 'team-a',
               'name': 'a'},
              {'flavor': 'pt.a100', 'count': 1, 'project': 'team-b',
               'name': 'b'},
              {'flavor': 'pt.l4', 'count': 2, 'project': 'team-a',
               'name': 'l'},
              {'flavor': 'pt.l4', 'count': 1, 'project': 'team-b',
               'name': 'm'}],
}


def _run(scenario):
    rc, out, err = cli.simulate(scenario, '--format', 'json')
    if rc != 0:
        raise AssertionError('simulate exited %d: %s' % (rc, err[-2000:]))
    return json.loads(out)


class TestQuotas(testtools.TestCase):

    def test_fifth_a100_refused_other_model_and_project_boot(self):
        data = _run(PASSTHROUGH)
        where = {p['server']: p.get('host') or p['error']
                 for p in data['placements']}
        for name in ('a-1', 'a-2', 'a-3', 'a-4', 'b-1'):
            self.assertEqual('cmp-a100', where[name])
        self.assertEqual('cmp-l4', where['l-1'])
        self.assertEqual('cmp-l4', where['m-1'])   # the default is per project
        # Nova's own quota error, naming the model's class
        self.assertEqual(
            'Quota exceeded: Project team-a is over a limit for [Resource '
            'class:CUSTOM_GPU_A100_80GB_PCIE is over limit of 4 due to '
            'current usage 4 and delta 1]', where['a-5'])
        self.assertIn('class:CUSTOM_GPU_L4 is over limit of 1', where['l-2'])
        refused = [p['server'] for p in data['placements']
                   if p.get('refused_by') == 'quota']
        self.assertEqual(['a-5', 'l-2'], refused)
        # refusals are not GPU failures: demand the scheduler never saw
        self.assertEqual((0, 2, None), (
            data['summary']['servers_failed'],
            data['summary']['servers_refused_by_quota'],
            data['summary']['first_gpu_failure']))
        self.assertEqual(
            [('team-a', 'class:CUSTOM_GPU_A100_80GB_PCIE', 4, 4, 1),
             ('(default)', 'class:CUSTOM_GPU_L4', 1, None, 1)],
            [(q['project'], q['resource'], q['limit'], q['used'],
              q['refused']) for q in data['quotas']])

    def test_vgpu_per_model_class(self):
        scenario = copy.deepcopy(PASSTHROUGH)
        del scenario['nova_conf']
        scenario['quotas'] = [{'project': 'team-a', 'model': 'A100',
                               'kind': 'vgpu', 'limit': 2}]
        scenario['hosts'] = [{
            'name': 'cmp-a100',
            'vgpu_resource_class': 'CUSTOM_VGPU_A100_80GB_PCIE',
            'gpus': [{'model': 'A100_80GB_PCIE', 'count': 2, 'mode': 'vgpu',
                      'vgpu_type': 'nvidia-471', 'vgpu_instances': 2}]}]
        scenario['flavors'] = [{
            'name': 'vgpu.a100', 'vcpus': 4, 'ram_mb': 8192,
            'extra_specs': {'resources:CUSTOM_VGPU_A100_80GB_PCIE': '1'}}]
        scenario['boots'] = [{'flavor': 'vgpu.a100', 'count': 3,
                              'project': 'team-a', 'name': 'a'},
                             {'flavor': 'vgpu.a100', 'count': 1,
                              'project': 'team-b', 'name': 'b'}]
        data = _run(scenario)
        where = {p['server']: p.get('host') or p['error']
                 for p in data['placements']}
        self.assertEqual(['cmp-a100'] * 2, [where['a-1'], where['a-2']])
        self.assertIn('class:CUSTOM_VGPU_A100_80GB_PCIE is over limit of 2',
                      where['a-3'])
        self.assertEqual('cmp-a100', where['b-1'])

    def test_unknown_model_named(self):
        scenario = copy.deepcopy(PASSTHROUGH)
        scenario['quotas'] = [{'project': 'team-a', 'model': 'H200',
                               'limit': 4}]
        rc, out, err = cli.simulate(scenario)
        self.assertEqual(2, rc)
        self.assertIn("quotas[0].model: no GPU resource class of the "
                      "scenario's hosts matches 'H200' (known: "
                      "A100_80GB_PCIE (passthrough), L4 (passthrough))", err)
        self.assertNotIn('Traceback', err)
