# SPDX-License-Identifier: Apache-2.0

"""discover and mig plan print through text_table, in every format."""
import argparse
import contextlib
import csv
import io
import json

import testtools
import yaml

from gpu_nova_ext.cmd import cli
from gpu_nova_ext.cmd import discover
from gpu_nova_ext.cmd import mig
from gpu_nova_ext import text_table

SAMPLE = 'test://' + discover.SAMPLE_HOST


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(['--config-file', '/dev/null', 'discover', '--nvml',
                       'none', '--libvirt-uri', SAMPLE] + list(argv))
    return rc, out.getvalue(), err.getvalue()


class TestDiscoverFormats(testtools.TestCase):

    def test_table_lists_vgpu_types_under_their_gpu(self):
        rc, out, err = run()
        self.assertEqual(0, rc, err)
        lines = out.splitlines()
        self.assertTrue(lines[0].endswith(': 4 GPU(s)'), lines[0])
        self.assertTrue(lines[1].startswith('PCI ADDRESS   VENDOR'))
        self.assertTrue(lines[2].startswith('0000:3b:00.0  nvidia'))
        subs = lines[3:10]
        self.assertEqual(7, len(subs))
        self.assertTrue(all(s.startswith('    nvidia-4') for s in subs))
        # the sub-rows' columns line up (one renderer, shared widths)
        self.assertEqual(1, len({s.index('available') for s in subs}))
        offered = [s for s in subs if s.endswith('(offered)')]
        self.assertEqual(1, len(offered))
        self.assertIn('nvidia-471', offered[0])
        self.assertIn('available 7 of 8', offered[0])

    def test_json_keeps_its_keys_and_yaml_is_the_same(self):
        rc, out, err = run('--format', 'json')
        self.assertEqual(0, rc, err)
        data = json.loads(out)
        self.assertLessEqual({'host', 'gpus', 'warnings', 'notes'},
                             set(data))
        self.assertEqual('nvidia-471', data['gpus'][0]['offered_vgpu_type'])
        rc, out, err = run('-f', 'yaml')
        self.assertEqual(data, yaml.safe_load(out))

    def test_csv_value_and_columns(self):
        rc, out, err = run('-f', 'csv')
        self.assertEqual(0, rc, err)
        rows = list(csv.DictReader(io.StringIO(out)))
        self.assertEqual(list(discover.COLUMNS), list(rows[0]))
        self.assertEqual(['0000:3b:00.0', '0000:5e:00.0', '0000:86:00.0',
                          '0000:af:00.0'], [r['pci_address'] for r in rows])
        self.assertEqual('nvidia-471', rows[0]['offered'])
        rc, out, err = run('-f', 'value', '-c', 'pci_address', '-c', 'numa')
        self.assertEqual('0000:3b:00.0 0', out.splitlines()[0])

    def test_unknown_column_is_one_line(self):
        rc, out, err = run('-c', 'colour')
        self.assertEqual(2, rc)
        self.assertEqual(1, len(err.strip().splitlines()), err)
        self.assertIn('colour', err)
        self.assertIn('pci_address', err)

    def test_no_gpu(self):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(['--config-file', '/dev/null', 'discover',
                           '--nvml', 'none', '--libvirt-uri',
                           'test:///default'])
        self.assertEqual(0, rc, err.getvalue())
        lines = out.getvalue().splitlines()
        self.assertTrue(lines[0].endswith(': 0 GPU(s)'))
        self.assertTrue(lines[1].startswith('PCI ADDRESS  VENDOR'))
        self.assertEqual('(no GPU found)', lines[2])


class TestMigPlanListing(testtools.TestCase):

    ROWS = [
        {'gpu': '0000:3b:00.0', 'model': 'A100_80GB_PCIE',
         'mig_mode': 'disabled', 'layout': '3g.40gb=2',
         'layout_source': 'layouts', 'instances': [], 'in_line': False,
         'would': [], 'cannot': ['holds allocations in Placement (would '
                                 'enable MIG mode)']},
        {'gpu': '0000:86:00.0', 'model': 'A100_80GB_PCIE',
         'mig_mode': 'enabled', 'layout': '3g.40gb=2',
         'layout_source': 'host_layouts',
         'instances': ['3g.40gb@0', '3g.40gb@4'], 'in_line': True,
         'would': [], 'cannot': []}]

    def emit(self, *argv):
        parser = argparse.ArgumentParser()
        text_table.add_arguments(parser, document='d', rows='r')
        out, err = io.StringIO(), io.StringIO()
        text_table.emit(parser.parse_args(list(argv)),
                        mig.listing('cmp-1', self.ROWS, ['w']),
                        out=out, err=err)
        return out.getvalue(), err.getvalue()

    def test_table(self):
        out, _ = self.emit()
        self.assertEqual([
            'Host cmp-1: 2 GPU(s) with a MIG layout',
            'GPU           MODEL           MIG MODE  LAYOUT     '
            'LAYOUT SOURCE',
            '0000:3b:00.0  A100_80GB_PCIE  disabled  3g.40gb=2  layouts',
            '    cannot: holds allocations in Placement (would enable MIG '
            'mode)',
            '0000:86:00.0  A100_80GB_PCIE  enabled   3g.40gb=2  '
            'host_layouts',
            '    in line (instances: 3g.40gb@0, 3g.40gb@4)',
            'warning: w'], out.splitlines())

    def test_json_is_the_old_document(self):
        out, err = self.emit('--format', 'json')
        self.assertEqual({'host': 'cmp-1', 'gpus': self.ROWS,
                          'warnings': ['w']}, json.loads(out))
        self.assertEqual('', err)


class TestOneArgumentDefinition(testtools.TestCase):

    def test_every_printing_command_takes_the_same_options(self):
        parser = cli.build_parser()
        for argv in (['discover'], ['mig', 'plan'], ['simulate']):
            args = parser.parse_args(argv + ['-f', 'yaml', '-c', 'x'])
            self.assertEqual(('yaml', ['x']), (args.format, args.columns),
                             argv)
