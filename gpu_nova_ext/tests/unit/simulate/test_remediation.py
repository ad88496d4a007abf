# SPDX-License-Identifier: Apache-2.0

"""A scenario's ``remediation:`` and a boot's ``metadata:``: parsing,
errors naming the entry, and how moves are rendered."""
import copy
import csv
import io
import json

import testtools

from gpu_nova_ext import exception
from gpu_nova_ext.operator import remediation_policy as policy
from gpu_nova_ext.simulate import output
from gpu_nova_ext.simulate import remediation_spec
from gpu_nova_ext.simulate import result as res
from gpu_nova_ext.simulate import scenario as scn
from gpu_nova_ext.tests.unit.simulate import test_scenario

PATH = test_scenario.PATH


def _data(**remediation):
    data = copy.deepcopy(test_scenario.BASE)
    data['remediation'] = remediation
    return data


class TestRemediationKey(testtools.TestCase):

    def assertError(self, data, entry, *words):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                data, PATH)
        message = str(exc)
        self.assertIn(PATH, message)
        self.assertIn(entry + ':', message)
        for word in words:
            self.assertIn(word, message)

    def test_absent_is_off(self):
        s = scn.from_dict(copy.deepcopy(test_scenario.BASE), PATH)
        self.assertIsNone(s.remediation)

    def test_defaults_are_the_options_defaults_but_enabled(self):
        s = scn.from_dict(_data(), PATH)
        self.assertEqual(remediation_spec.Spec(
            policy='migrate', enabled=True, max_concurrent=4,
            max_concurrent_per_host=1, passthrough_live_migration=False),
            s.remediation)

    def test_values(self):
        s = scn.from_dict(_data(policy='notify', enabled=False,
                                max_concurrent=10,
                                max_concurrent_per_host=3,
                                passthrough_live_migration=True), PATH)
        self.assertEqual(('notify', False, 10, 3, True), (
            s.remediation.policy, s.remediation.enabled,
            s.remediation.max_concurrent,
            s.remediation.max_concurrent_per_host,
            s.remediation.passthrough_live_migration))

    def test_not_a_mapping(self):
        data = _data()
        data['remediation'] = 'migrate'
        self.assertError(data, 'remediation', 'expected a mapping')

    def test_unknown_key(self):
        self.assertError(_data(max_per_host=2), 'remediation',
                         "'max_per_host'", 'max_concurrent_per_host')

    def test_bad_policy(self):
        self.assertError(_data(policy='reboot'), 'remediation.policy',
                         "'reboot'", 'notify, migrate, evacuate')

    def test_limits_follow_the_options_bounds(self):
        self.assertError(_data(max_concurrent=0),
                         'remediation.max_concurrent', 'at least 1')
        self.assertError(_data(max_concurrent=101),
                         'remediation.max_concurrent', 'at most 100')
        self.assertError(_data(max_concurrent_per_host=21),
                         'remediation.max_concurrent_per_host',
                         'at most 20')
        self.assertError(_data(max_concurrent_per_host='2'),
                         'remediation.max_concurrent_per_host',
                         'expected an integer')

    def test_booleans(self):
        self.assertError(_data(enabled='yes'), 'remediation.enabled',
                         'true or false')
        self.assertError(_data(passthrough_live_migration=1),
                         'remediation.passthrough_live_migration',
                         'true or false')


class TestBootMetadata(testtools.TestCase):

    def _boot(self, metadata):
        data = copy.deepcopy(test_scenario.BASE)
        data['boots'][0]['metadata'] = metadata
        return data

    def test_opt_out(self):
        s = scn.from_dict(self._boot({policy.OPT_OUT_KEY: 'never'}), PATH)
        self.assertEqual({policy.OPT_OUT_KEY: 'never'}, s.steps[0].metadata)

    def test_numbers_become_strings(self):
        s = scn.from_dict(self._boot({'tier': 2}), PATH)
        self.assertEqual({'tier': '2'}, s.steps[0].metadata)

    def test_errors_name_the_entry(self):
        for metadata, entry, word in (
                ('never', 'boots[0].metadata', 'expected a mapping'),
                ({'k': ['a']}, 'boots[0].metadata.k', 'strings'),
                ({'k': True}, 'boots[0].metadata.k', 'strings'),
                ({'k': 'x' * 300}, 'boots[0].metadata.k', '128')):
            exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                    self._boot(metadata), PATH)
            self.assertIn(entry + ':', str(exc))
            self.assertIn(word, str(exc))


def _result():
    s = scn.Scenario(path='/s.yaml', description='', nova_conf={},
                     hosts=[], flavors={}, steps=[])
    r = res.Result(scenario=s)
    r.servers = [
        res.ServerResult(server='a-1', flavor='a', host='h1',
                         gpus=['0000:3b:00.0']),
        res.ServerResult(server='a-2', flavor='a', host='h1',
                         gpus=['0000:3b:00.0'])]
    r.moves = [
        res.MoveResult(server='a-1', host='h1', gpus=['0000:3b:00.0'],
                       action='live-migrate', outcome='moved',
                       reason='vgpu server, status ACTIVE', to_host='h2',
                       to_gpus=['0000:86:00.0'], step=4),
        res.MoveResult(server='a-2', host='h1', gpus=['0000:3b:00.0'],
                       action='live-migrate', outcome='failed',
                       reason='vgpu server, status ACTIVE',
                       error='No valid host: no host passed the filters',
                       step=5)]
    return r


class TestMovesOutput(testtools.TestCase):

    def test_table(self):
        text = output.to_table([_result()])
        lines = text.splitlines()
        header = next(i for i, line in enumerate(lines)
                      if line.startswith('MOVED SERVER'))
        moved, failed = lines[header + 1], lines[header + 2]
        self.assertEqual(['a-1', 'h1', '0000:3b:00.0', 'h2', '0000:86:00.0',
                          'live-migrate'], moved.split())
        self.assertIn('FAILED: No valid host: no host passed the filters',
                      failed)

    def test_no_remediation_no_table(self):
        r = _result()
        r.moves = None
        self.assertNotIn('MOVED SERVER', output.to_table([r]))
        self.assertNotIn('remediation', json.loads(output.to_json([r])))
        self.assertEqual(output.CSV_FIELDS, tuple(next(csv.reader(
            io.StringIO(output.to_csv([r]))))))

    def test_nothing_happened_is_said(self):
        r = _result()
        r.moves = []
        self.assertIn('REMEDIATION: no GPU with servers turned unhealthy',
                      output.to_table([r]))

    def test_json(self):
        data = json.loads(output.to_json([_result()]))
        self.assertEqual([
            {'server': 'a-1', 'step': 4, 'from_host': 'h1',
             'from_gpus': ['0000:3b:00.0'], 'action': 'live-migrate',
             'outcome': 'moved', 'to_host': 'h2',
             'to_gpus': ['0000:86:00.0'],
             'reason': 'vgpu server, status ACTIVE'},
            {'server': 'a-2', 'step': 5, 'from_host': 'h1',
             'from_gpus': ['0000:3b:00.0'], 'action': 'live-migrate',
             'outcome': 'failed', 'to_host': None, 'to_gpus': [],
             'reason': 'No valid host: no host passed the filters'}],
            data['remediation'])

    def test_csv(self):
        rows = list(csv.DictReader(io.StringIO(output.to_csv([_result()]))))
        self.assertEqual(['boot', 'boot', 'move', 'move'],
                         [r['record'] for r in rows])
        moved, failed = rows[2:]
        self.assertEqual(('a-1', 'a', 'h2', '0000:86:00.0', '', 'h1',
                          '0000:3b:00.0', 'moved', '4'), (
            moved['server'], moved['flavor'], moved['host'], moved['gpus'],
            moved['error'], moved['from_host'], moved['from_gpus'],
            moved['outcome'], moved['step']))
        self.assertEqual(('', 'failed',
                          'No valid host: no host passed the filters'),
                         (failed['host'], failed['outcome'],
                          failed['error']))


class TestXidEvent(testtools.TestCase):

    def _event(self, **event):
        data = copy.deepcopy(test_scenario.BASE)
        data['boots'][1]['event'] = dict(host='cmp-1', gpu='3b:00.0',
                                         **event)
        return data

    def test_xids(self):
        s = scn.from_dict(self._event(xids=[79, 48]), PATH)
        self.assertEqual([79, 48], s.steps[1].xids)
        s = scn.from_dict(self._event(xids=79), PATH)
        self.assertEqual([79], s.steps[1].xids)

    def test_bad_xid_names_the_entry(self):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                self._event(xids=[79, 'boom']), PATH)
        self.assertIn('boots[1].event.xids[1]:', str(exc))
        self.assertIn('expected an integer', str(exc))

    def test_an_event_changes_something(self):
        exc = self.assertRaises(exception.ScenarioError, scn.from_dict,
                                self._event(reasons=['x']), PATH)
        self.assertIn('boots[1].event:', str(exc))
        self.assertIn('"xids"', str(exc))
