# SPDX-License-Identifier: Apache-2.0

"""Topology discovery per board layout through the real sources.

libvirt's test driver (a host XML with bridges and ``<parent>``), the
sysfs source over a fake tree with the same bridge chain, and the NVML
source over the fake library, merged by ``manager.discover`` (design
doc: Topology).
"""
import collections
import contextlib
import io
import json
import os

import fixtures
import testtools

from gpu_nova_ext.agent import payload
from gpu_nova_ext.cmd import cli
from gpu_nova_ext.inventory import manager
from gpu_nova_ext.inventory import topology
from gpu_nova_ext.state import schema
from gpu_nova_ext.tests.unit.inventory import helpers
from gpu_nova_ext_dev.fakes import nvml as fake_nvml
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext_dev.fakes import topology as fake_topology
from gpu_nova_ext_dev import libvirt_hosts


class LayoutHost(testtools.TestCase):
    """One layout served by all three fakes."""

    def host(self, key, sources=('libvirt', 'sysfs', 'nvml')):
        layout = fake_topology.LAYOUTS[key]
        self.useFixture(fake_nvml.FakeNvml(layout.device_specs()))
        tree = self.useFixture(sysfs.SysfsTree())
        layout.build_sysfs(tree)
        agent = self.useFixture(helpers.AgentConf(sysfs_root=tree.root))
        xml = os.path.join(agent.tmp, 'host.xml')
        with open(xml, 'w') as f:
            f.write(libvirt_hosts.topology_test_xml(layout))
        agent.set_override(agent.conf, 'libvirt_uri', 'test://' + xml)
        agent.set_override(agent.conf, 'inventory_sources', list(sources))
        self.conf = agent.conf
        self.layout = layout
        return manager.discover(agent.conf, sources=list(sources))

    def config_file(self):
        path = self.useFixture(fixtures.TempDir()).join('agent.conf')
        agent = self.conf.agent
        with open(path, 'w') as f:
            f.write('[agent]\nlibvirt_uri = %s\nsysfs_root = %s\n'
                    'inventory_sources = libvirt,sysfs,nvml\n'
                    'nova_config_file = %s\nnova_config_dir = %s\n' % (
                        agent.libvirt_uri, agent.sysfs_root,
                        agent.nova_config_file, agent.nova_config_dir))
        return path

    def domains(self, inv):
        groups = collections.defaultdict(list)
        for gpu in inv.gpus:
            groups[gpu.link_domain].append(gpu.pci_address)
        return dict(groups)

    def switches(self, inv):
        groups = collections.defaultdict(list)
        for gpu in inv.gpus:
            groups[gpu.pci_switch].append(gpu.pci_address)
        return dict(groups)


class TestHgx(LayoutHost):

    def test_h100_one_domain_switch_pairs_two_numa_nodes(self):
        inv = self.host('HGX_H100_8GPU')
        self.assertEqual([], inv.warnings)
        self.assertEqual(8, len(inv.gpus))
        self.assertEqual({'0000:1b:00.0': [g.pci_address for g in inv.gpus]},
                         self.domains(inv))
        self.assertEqual(
            {'0000:19:00.0': ['0000:1b:00.0', '0000:43:00.0'],
             '0000:50:00.0': ['0000:52:00.0', '0000:61:00.0'],
             '0000:9b:00.0': ['0000:9d:00.0', '0000:c3:00.0'],
             '0000:cf:00.0': ['0000:d1:00.0', '0000:df:00.0']},
            self.switches(inv))
        self.assertEqual([0, 0, 0, 0, 1, 1, 1, 1],
                         [g.numa_node for g in inv.gpus])
        # 18 links over 4 NVSwitches, 5/4/4/5
        self.assertEqual({'0000:05:00.0': 5, '0000:06:00.0': 4,
                          '0000:07:00.0': 4, '0000:08:00.0': 5},
                         inv.gpus[0].nvlink_peers)
        rows = topology.matrix(inv.gpus)
        self.assertEqual(['X'] + ['NV18'] * 7, rows[0])
        # the NVSwitches are GPU-vendor functions: a note each, no GPU
        self.assertEqual(4, sum('10de:22a3' in n for n in inv.notes),
                         inv.notes)

    def test_h200_too(self):
        inv = self.host('HGX_H200_8GPU')
        self.assertEqual(['H200'] * 8, [g.model for g in inv.gpus])
        self.assertEqual({'0000:1b:00.0'},
                         {g.link_domain for g in inv.gpus})

    def test_without_nvml_no_domain_but_switches(self):
        inv = self.host('HGX_H100_8GPU', sources=('libvirt', 'sysfs'))
        self.assertEqual({None}, {g.link_domain for g in inv.gpus})
        self.assertEqual('0000:19:00.0', inv.gpus[1].pci_switch)
        self.assertEqual('PIX', topology.matrix(inv.gpus)[0][1])
        self.assertEqual('NODE', topology.matrix(inv.gpus)[0][2])
        self.assertEqual('SYS', topology.matrix(inv.gpus)[0][4])

    def test_sysfs_alone_finds_the_switches(self):
        inv = self.host('HGX_H100_8GPU', sources=('sysfs',))
        self.assertEqual(4, len(self.switches(inv)))
        self.assertNotIn(None, self.switches(inv))

    def test_libvirt_alone_finds_the_switches(self):
        inv = self.host('HGX_H100_8GPU', sources=('libvirt',))
        self.assertEqual(self.switches(self.host(
            'HGX_H100_8GPU', sources=('sysfs',))), self.switches(inv))

    def test_state_is_compact(self):
        inv = self.host('HGX_H100_8GPU')
        gpu = inv.gpus[0].to_state()
        self.assertEqual('0000:1b:00.0', gpu['link_domain'])
        self.assertEqual('0000:19:00.0', gpu['pci_switch'])
        self.assertNotIn('nvlink_peers', gpu)

    def test_discover_prints_the_matrix_and_json(self):
        self.host('HGX_H100_8GPU')
        for argv, check in ((['discover'], self._table),
                            (['discover', '-f', 'json'], self._json)):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), \
                    contextlib.redirect_stderr(err):
                rc = cli.main(['--config-file', self.config_file()] + argv)
            self.assertEqual(0, rc, err.getvalue())
            check(out.getvalue())

    def _table(self, text):
        lines = text.splitlines()
        head = [i for i, line in enumerate(lines)
                if line.lstrip().startswith('GPU0  GPU1')]
        self.assertEqual(1, len(head), text)
        row0 = lines[head[0] + 1].split()
        self.assertEqual(['GPU0', 'X'] + ['NV18'] * 7 + [
            '0000:1b:00.0', '0', '0000:1b:00.0', '0000:19:00.0'], row0)

    def _json(self, text):
        data = json.loads(text)
        gpu = data['gpus'][0]
        self.assertEqual((0, '0000:19:00.0', '0000:1b:00.0'),
                         (gpu['numa_node'], gpu['pci_switch'],
                          gpu['link_domain']))
        self.assertEqual(18, sum(gpu['nvlink_peers'].values()))


class TestPcieBridgedPairs(LayoutHost):

    def test_a100_four_domains_of_two(self):
        inv = self.host('A100_PCIE_8GPU')
        self.assertEqual([], inv.warnings)
        domains = self.domains(inv)
        self.assertEqual(4, len(domains))
        self.assertEqual({2}, {len(m) for m in domains.values()})
        # a bridge pair shares its PCIe switch here
        self.assertEqual(sorted(domains.values()),
                         sorted(self.switches(inv).values()))
        self.assertEqual({'0000:43:00.0': 12}, inv.gpus[0].nvlink_peers)
        rows = topology.matrix(inv.gpus)
        self.assertEqual(['X', 'NV12', 'NODE', 'NODE', 'SYS', 'SYS', 'SYS',
                          'SYS'], rows[0])

    def test_h100_nvl_pairs_have_18_links(self):
        inv = self.host('H100_NVL_8GPU', sources=('libvirt', 'nvml'))
        self.assertEqual(4, len(self.domains(inv)))
        self.assertEqual('NV18', topology.matrix(inv.gpus)[7][6])


class TestL40s(LayoutHost):

    def test_no_domains_no_switches_two_sockets(self):
        inv = self.host('L40S_4GPU')
        self.assertEqual([], inv.warnings)
        self.assertEqual({None: [g.pci_address for g in inv.gpus]},
                         self.domains(inv))
        self.assertEqual({None}, set(self.switches(inv)))
        self.assertEqual([{}] * 4, [g.nvlink_peers for g in inv.gpus])
        self.assertEqual(['X', 'NODE', 'SYS', 'SYS'],
                         topology.matrix(inv.gpus)[0])
        # optional keys: absent for a GPU without links or switch
        state = inv.gpus[0].to_state()
        self.assertNotIn('link_domain', state)
        self.assertNotIn('pci_switch', state)


class TestFactsMessage(LayoutHost):

    def messages(self, inv):
        built = payload.build_payload(
            inv, host='cmp-1', nodename='cmp-1', root_provider_uuid='root',
            mode='annotate', now=1.0)
        return built, payload.Publisher().messages(built)

    def test_topology_passes_the_schema(self):
        for key in ('HGX_H100_8GPU', 'L40S_4GPU'):
            built, (facts, metrics) = self.messages(self.host(key))
            self.assertEqual('facts', facts['kind'])
            self.assertIsNone(schema.problem(facts, 64))
            self.assertIsNone(schema.problem(metrics, 64))

    def test_a_bad_link_domain_is_refused(self):
        built, (facts, _metrics) = self.messages(self.host('L40S_4GPU'))
        facts['gpus'][0]['link_domain'] = 7
        self.assertIn('link_domain', schema.problem(facts, 64))

    def test_a_topology_change_is_a_facts_change(self):
        built, _messages = self.messages(self.host('HGX_H100_8GPU'))
        gpu = built['gpus'][0]
        self.assertEqual('0000:1b:00.0', payload.facts_of(gpu)['link_domain'])
        before = payload.facts_digest(built)
        for key, value in (('link_domain', None), ('pci_switch', None)):
            changed = dict(built, gpus=[dict(gpu, **{key: value})] +
                           built['gpus'][1:])
            self.assertNotEqual(before, payload.facts_digest(changed))
