# SPDX-License-Identifier: Apache-2.0

"""The bounded, strict YAML loader."""
import io

import testtools
import yaml

from gpu_nova_ext import safe_yaml


def _bomb(levels=9):
    """The classic "billion laughs": 9 ** levels strings from ~1 KB."""
    text = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    prev = 'a'
    for name in 'bcdefghijk'[:levels - 1]:
        text += '%s: &%s [%s]\n' % (name, name, ','.join(['*' + prev] * 9))
        prev = name
    return text


class TestSafeYaml(testtools.TestCase):

    def test_plain_data_and_aliases_within_bounds(self):
        data = safe_yaml.load('x: &x {a: 1}\ny: *x\nz: {<<: *x, b: 2}\n')
        self.assertEqual({'x': {'a': 1}, 'y': {'a': 1},
                          'z': {'a': 1, 'b': 2}}, data)
        self.assertIsNone(safe_yaml.load(''))
        self.assertEqual([1, 2], safe_yaml.load(io.StringIO('[1, 2]')))

    def test_alias_bomb_refused_before_expansion(self):
        exc = self.assertRaises(safe_yaml.SafeYamlError, safe_yaml.load,
                                _bomb())
        self.assertIn('alias bomb', str(exc))
        self.assertIn('line', str(exc))
        # a yaml.YAMLError: callers that catch those keep working
        self.assertIsInstance(exc, yaml.YAMLError)

    def test_expansion_bound_is_the_limit(self):
        text = _bomb(levels=3)           # 9 + 81 + 729 strings
        self.assertIsNotNone(safe_yaml.load(text, max_nodes=10000))
        self.assertRaises(safe_yaml.SafeYamlError, safe_yaml.load, text,
                          max_nodes=500)

    def test_duplicate_key_refused(self):
        exc = self.assertRaises(safe_yaml.SafeYamlError, safe_yaml.load,
                                'hosts: 1\nflavors: 2\nhosts: 3\n')
        self.assertIn("key 'hosts' at line 3", str(exc))
        self.assertIn('first at line 1', str(exc))
        # the same key in two mappings is fine
        self.assertEqual({'a': {'k': 1}, 'b': {'k': 2}},
                         safe_yaml.load('a: {k: 1}\nb: {k: 2}\n'))

    def test_size_bound(self):
        self.assertRaises(safe_yaml.SafeYamlError, safe_yaml.load,
                          io.StringIO('x' * 101), max_bytes=100)
        self.assertEqual('x' * 100, safe_yaml.load('x' * 100,
                                                   max_bytes=100))

    def test_no_python_objects(self):
        self.assertRaises(yaml.YAMLError, safe_yaml.load,
                          '!!python/object/apply:os.system ["true"]')

    def test_recursive_alias_refused(self):
        self.assertRaises(yaml.YAMLError, safe_yaml.load, '&a [*a]')
