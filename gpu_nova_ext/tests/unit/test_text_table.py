# SPDX-License-Identifier: Apache-2.0

"""text_table: the renderer, and -f/-c as cliff's formatters mean them."""
import argparse
import csv
import io
import json

import testtools
import yaml

from gpu_nova_ext import exception
from gpu_nova_ext import text_table


def _listing(**kwargs):
    values = dict(
        columns=('pci_address', 'model', 'numa'),
        rows=[['0000:3b:00.0', 'A100', 0], ['0000:86:00.0', None, 1]],
        details=[[['nvidia-471', 'available 7 of 8', '(offered)']],
                 [['nvidia-469', 'available 20 of 20', '']]],
        title=['Host cmp-1: 2 GPU(s)'], messages=['warning: one'],
        document={'host': 'cmp-1', 'gpus': [1, 2], 'warnings': ['one']})
    values.update(kwargs)
    return text_table.Listing(**values)


class TestEmit(testtools.TestCase):

    def emit(self, argv, listing=None):
        parser = argparse.ArgumentParser()
        text_table.add_arguments(parser, document='d', rows='r')
        out, err = io.StringIO(), io.StringIO()
        text_table.emit(parser.parse_args(argv), listing or _listing(),
                        out=out, err=err)
        return out.getvalue(), err.getvalue()

    def test_table(self):
        out, err = self.emit([])
        self.assertEqual([
            'Host cmp-1: 2 GPU(s)',
            'PCI ADDRESS   MODEL  NUMA',
            '0000:3b:00.0  A100   0',
            '    nvidia-471  available 7 of 8    (offered)',
            '0000:86:00.0  -      1',
            '    nvidia-469  available 20 of 20',
            'warning: one'], out.splitlines())
        self.assertEqual('', err)

    def test_json_and_yaml_print_the_document(self):
        out, err = self.emit(['--format', 'json'])
        self.assertEqual(_listing().document, json.loads(out))
        self.assertEqual('', err)
        out, _ = self.emit(['-f', 'yaml'])
        self.assertEqual(_listing().document, yaml.safe_load(out))

    def test_json_without_document_or_with_columns_gives_rows(self):
        out, err = self.emit(['-f', 'json', '-c', 'PCI ADDRESS',
                              '-c', 'numa'])
        self.assertEqual([{'pci_address': '0000:3b:00.0', 'numa': 0},
                          {'pci_address': '0000:86:00.0', 'numa': 1}],
                         json.loads(out))
        self.assertEqual('warning: one\n', err)
        out, _ = self.emit(['-f', 'json'], _listing(document=None))
        self.assertIsNone(json.loads(out)[1]['model'])

    def test_csv_and_value(self):
        out, err = self.emit(['-f', 'csv'])
        self.assertEqual([['pci_address', 'model', 'numa'],
                          ['0000:3b:00.0', 'A100', '0'],
                          ['0000:86:00.0', '', '1']],
                         list(csv.reader(io.StringIO(out))))
        self.assertEqual('warning: one\n', err)
        out, err = self.emit(['-f', 'value', '-c', 'model', '-c', 'numa'])
        self.assertEqual('A100 0\n- 1\n', out)
        self.assertEqual('warning: one\n', err)

    def test_columns_keep_the_command_order(self):
        out, _ = self.emit(['-f', 'csv', '-c', 'numa', '-c', 'Pci-Address'])
        self.assertEqual('pci_address,numa', out.splitlines()[0])

    def test_unknown_column_names_the_choices(self):
        exc = self.assertRaises(exception.ConfigError, self.emit,
                                ['-c', 'modle'])
        self.assertIn('-c modle', str(exc))
        self.assertIn('pci_address, model, numa', str(exc))

    def test_report_is_the_table_unless_columns_are_chosen(self):
        listing = _listing(report=lambda: 'REPORT')
        self.assertEqual('REPORT\n', self.emit([], listing)[0])
        out, _ = self.emit(['-c', 'model'], listing)
        self.assertIn('MODEL', out)
        self.assertNotIn('REPORT', out)

    def test_empty(self):
        out, _ = self.emit([], _listing(rows=[], details=[],
                                        empty='(no GPU found)'))
        self.assertEqual(['Host cmp-1: 2 GPU(s)', 'PCI ADDRESS  MODEL  NUMA',
                          '(no GPU found)', 'warning: one'],
                         out.splitlines())

    def test_json_is_strict(self):
        self.assertRaises(ValueError, self.emit, ['-f', 'json'],
                          _listing(document={'x': float('nan')}))

    def test_bad_format_is_argparse_error(self):
        err = io.StringIO()
        parser = argparse.ArgumentParser()
        text_table.add_arguments(parser, document='d', rows='r')
        parser.error = lambda message: err.write(message)
        parser.parse_args(['-f', 'xml'])
        self.assertIn("invalid choice: 'xml'", err.getvalue())
