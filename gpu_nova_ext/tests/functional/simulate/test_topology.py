# SPDX-License-Identifier: Apache-2.0

"""Topology end to end in the simulator (design doc: Topology): host kinds
with NVLink pairs, the agent's discovery over the simulated source, the
facts through the state channel, GpuTopologyFilter and the multi-GPU
choice of GpuCandidateOrderFilter in Nova's scheduler code, and the
summary's split counts."""
import collections
import json
import os

import testtools
import yaml

from gpu_nova_ext import simulate as simulate_pkg
from gpu_nova_ext.tests.functional.simulate import cli

SHIPPED = os.path.join(os.path.dirname(simulate_pkg.__file__), 'scenarios',
                       'topology.yaml')


def _scenario(extra_specs):
    return {
        'description': 'two PCIe hosts of four NVLink-bridged pairs',
        'nova_conf': {'pci': {'alias': [{
            'name': 'gpu', 'resource_class': 'CUSTOM_GPU_TOPO',
            'device_type': 'type-PCI'}]}},
        'hosts': [{'name': 'pcie', 'count': 2, 'vcpus': 128,
                   'memory_mb': 1048576,
                   'pci_resource_class': 'CUSTOM_GPU_TOPO',
                   'gpus': [{'model': 'A100_80GB_PCIE', 'count': 8,
                             'nvlink': 'pairs'}]}],
        'flavors': [
            {'name': 'g1', 'vcpus': 4, 'ram_mb': 8192,
             'extra_specs': {'pci_passthrough:alias': 'gpu:1'}},
            {'name': 'g2', 'vcpus': 8, 'ram_mb': 16384,
             'extra_specs': dict(extra_specs, **{
                 'pci_passthrough:alias': 'gpu:2',
                 'group_policy': 'isolate'})}],
        # two single GPUs first: a 2-GPU server chosen without topology
        # then splits a pair
        'boots': [{'flavor': 'g1', 'count': 2},
                  {'flavor': 'g2', 'count': 6}],
    }


class TestTopology(testtools.TestCase):

    def test_pairs_kept_whole_and_nvlink_required(self):
        rc, out, err = cli.simulate(_scenario({}), '-f', 'json',
                                    '--compare', 'pack', 'nova')
        self.assertEqual(0, rc, err)
        pack, nova = json.loads(out)['policies']
        for result in (pack, nova):
            self.assertEqual(6, result['summary']['multi_gpu_servers'])
        # ours: every 2-GPU server on one bridged pair, one socket
        self.assertEqual(0, pack['summary'][
            'multi_gpu_not_in_one_link_domain'])
        self.assertEqual(0, pack['summary']['multi_gpu_across_numa_nodes'])
        # Nova's own chain takes Placement's first candidate
        self.assertGreater(nova['summary'][
            'multi_gpu_not_in_one_link_domain'], 0)

        rc, out, err = cli.simulate(_scenario({'gpu:topology': 'nvlink'}),
                                    '-f', 'json', '--compare', 'spread')
        self.assertEqual(0, rc, err)
        spread = json.loads(out)
        # required: no split even where spreading would split a pair
        self.assertEqual(6, spread['summary']['multi_gpu_servers'])
        self.assertEqual(0, spread['summary'][
            'multi_gpu_not_in_one_link_domain'])


def _link_domains(host: str, addresses: list) -> list:
    """The NVLink domains of a host of the shipped topology scenario.

    As its description says: an HGX board's eight GPUs share NVSwitch;
    a PCIe host's GPUs are bridged in pairs, in PCI address order.
    """
    addresses = sorted(addresses)
    if host.startswith('hgx'):
        return [set(addresses)]
    return [set(addresses[i:i + 2]) for i in range(0, len(addresses), 2)]


class TestNvlinkRefusals(testtools.TestCase):
    """``gpu:topology=nvlink``: refused only when no domain can take it.

    The shipped mixed scenario, a third of its size (4 HGX boards, 8
    PCIe hosts of bridged pairs), every multi-GPU flavor asking nvlink,
    1/2/4/8-GPU servers until every GPU was asked for.  Replaying the
    placements in order: no server split across domains, and at every
    refusal of a multi-GPU server no host had a domain with that many
    free GPUs and the server's CPUs and RAM free.
    """

    def test_refused_only_without_an_intact_domain(self):
        with open(SHIPPED) as f:
            scenario = yaml.safe_load(f)
        for kind in scenario['hosts']:
            kind['count'] //= 3
        for flavor in scenario['flavors']:
            if flavor['name'] != 'g1':
                flavor['extra_specs']['gpu:topology'] = 'nvlink'
        rc, out, err = cli.simulate(scenario, '-f', 'json')
        self.assertEqual(0, rc, err)
        result = json.loads(out)
        summary = result['summary']
        # the replay below holds only without deletes
        self.assertEqual(0, summary['servers_deleted'])
        self.assertEqual(0, summary['multi_gpu_not_in_one_link_domain'])
        kinds = {k['name']: k for k in scenario['hosts']}
        flavors = {f['name']: f for f in scenario['flavors']}
        gpus = collections.defaultdict(list)
        for row in result['occupancy']:
            gpus[row['host']].append(row['gpu'])
        domains = {h: _link_domains(h, a) for h, a in gpus.items()}
        used = collections.defaultdict(set)
        cpu = collections.Counter()
        ram = collections.Counter()
        refused = 0
        for p in result['placements']:
            flavor = flavors[p['flavor']]
            if p.get('host'):
                used[p['host']].update(p['gpus'])
                cpu[p['host']] += flavor['vcpus']
                ram[p['host']] += flavor['ram_mb']
                continue
            want = int(flavor['extra_specs']['pci_passthrough:alias']
                       .split(':')[1])
            if want < 2:
                continue
            refused += 1
            for host, host_domains in domains.items():
                kind = kinds[host.rsplit('-', 1)[0]]
                room = (cpu[host] + flavor['vcpus'] <= kind['vcpus'] and
                        ram[host] + flavor['ram_mb'] <= kind['memory_mb'])
                free = max(len(d - used[host]) for d in host_domains)
                self.assertFalse(
                    room and free >= want,
                    '%s (%d GPUs, nvlink) refused while %s had a domain '
                    'with %d free GPUs: %s' % (p['server'], want, host,
                                               free, p.get('error')))
        # the check above had refusals to look at
        self.assertGreater(refused, 0, summary)
