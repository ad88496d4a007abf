# SPDX-License-Identifier: Apache-2.0

"""Monitoring as shipped: the metric reference, the dashboard, the rules.

* The metric reference (doc/source/metrics.rst) is rendered from the
  exporter (``agent/metric_reference.py``); every series the exporter
  serves for real NVIDIA (fake NVML), AMD and Intel (fake sysfs) samples
  must be in it, so a metric added where the reference cannot see it
  fails here.
* Every metric name the Grafana dashboard and the Prometheus alert rules
  query is one the exporter serves, the dashboard's pickers work for
  every vendor, every query filters by job, and every variable it
  declares is used (and every one it uses declared).
"""
import importlib
import json
import os
import re
import sys

from prometheus_client import parser
import testtools
import yaml

from gpu_nova_ext.agent import exporter
from gpu_nova_ext.agent import metric_reference
from gpu_nova_ext_dev.fakes import sysfs
from gpu_nova_ext.tests.unit.agent import health_base

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                   '..', '..'))
DASHBOARD = os.path.join(TOP, 'contrib', 'grafana', 'gpu-nova-ext.json')
RULES = os.path.join(TOP, 'contrib', 'prometheus', 'gpu-nova-ext-alerts.yml')

# PromQL words that are not metric names
_KEYWORDS = {'by', 'without', 'on', 'ignoring', 'group_left', 'group_right',
             'and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan'}


def promql_metrics(expr: str) -> set[str]:
    """Metric names an expression selects (not functions, labels, words)."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)      # strings
    expr = re.sub(r'\{[^}]*\}', ' ', expr)               # label matchers
    expr = re.sub(r'\[[^\]]*\]', ' ', expr)              # ranges
    expr = re.sub(r'\b(?:by|without|on|ignoring|group_left|group_right)'
                  r'\s*\([^)]*\)', ' ', expr)            # label lists
    names = set()
    for m in re.finditer(r'(?<![\w.$])([A-Za-z_:][\w:]*)\s*(\()?', expr):
        word, call = m.groups()
        if call or word.lower() in _KEYWORDS:
            continue
        names.add(word)
    return names


class TestMetricReference(health_base.MonitorTestCase):

    def _exposition_of_every_vendor(self):
        tree = self.useFixture(sysfs.GpuTree())
        tree.add_amd_gpu('0000:11:00.0')
        tree.add_xe_gpu('0000:29:00.0')
        self.cfg.config(group='agent', sysfs_root=tree.root)
        m = self.make_monitor()
        m.exporter = exporter.Exporter('cmp-1', '127.0.0.1', 0)
        self.fake.set_active_vgpus(0, [(471, 10)])
        self.fake.inject_xid(0, 48)
        m.sample_once(now=0)
        return m.exporter.render()

    def test_every_served_series_is_in_the_reference(self):
        text = self._exposition_of_every_vendor()
        served = {f.name for f in parser.text_string_to_metric_families(
            text)}
        vendors = set(re.findall(r'device="(nvidia|card)\d+"', text))
        self.assertEqual({'nvidia', 'card'}, vendors)
        self.assertIn('gpu_gfx_activity', served)          # AMD
        self.assertIn('DCGM_FI_DEV_GPU_UTIL', served)      # NVIDIA, Intel
        self.assertEqual(set(), served - metric_reference.metric_names())

    def test_reference_entries(self):
        families = metric_reference.metric_families()
        by_name = {f.name: f for f in families}
        # every table row of the exporter is there, with its help text
        for key, name, doc, scale in exporter.DCGM_METRICS:
            self.assertEqual(doc, by_name[name].help)
        for key, (name, doc) in exporter.AMD_METRICS.items():
            self.assertEqual(('amd',), by_name[name].vendors)
        for fam in families:
            self.assertTrue(fam.help, fam.name)
            self.assertTrue(fam.vendors, fam.name)
        self.assertEqual(('nvidia', 'amd', 'intel'),
                         by_name['gpu_nova_ext_health_code'].vendors)
        self.assertIn('state', by_name['gpu_nova_ext_health_state'].labels)

    def test_the_page_renders_every_metric(self):
        sys.path.insert(0, os.path.join(TOP, 'doc', 'source', '_exts'))
        self.addCleanup(sys.path.remove,
                        os.path.join(TOP, 'doc', 'source', '_exts'))
        ext = importlib.import_module('metric_reference')
        table = '\n'.join(ext.table_lines())
        for name in metric_reference.metric_names():
            self.assertIn('* - ``%s``' % name, table)
        with open(os.path.join(TOP, 'doc', 'source', 'metrics.rst')) as f:
            self.assertIn('.. gpu-nova-ext-metrics::', f.read())


class TestDashboard(testtools.TestCase):

    def setUp(self):
        super().setUp()
        with open(DASHBOARD) as f:
            self.dashboard = json.load(f)
        self.names = metric_reference.metric_names()
        self.variables = {v['name']: v
                          for v in self.dashboard['templating']['list']}

    def _queries(self):
        for panel in self.dashboard['panels']:
            for target in panel['targets']:
                yield panel, target['expr']

    def _variable_query(self, var):
        query = var['query']
        return query['query'] if isinstance(query, dict) else query

    def test_every_metric_is_served_by_the_exporter(self):
        used = set()
        for panel, expr in self._queries():
            used |= promql_metrics(expr)
        for var in self.variables.values():
            if var['type'] == 'query':
                q = self._variable_query(var)
                m = re.match(r'label_values\((.*),\s*\w+\)$', q)
                used |= promql_metrics(m.group(1) if m else q)
        self.assertGreater(len(used), 30)
        self.assertEqual(set(), used - self.names)

    def test_every_query_filters_by_job(self):
        for panel, expr in self._queries():
            for selector in re.findall(r'[\w:]+\{[^}]*\}', expr):
                self.assertIn('job=~"$job"', selector,
                              '%s: %s' % (panel['title'], expr))

    def test_pickers_work_for_every_vendor(self):
        by_name = {f.name: f for f in metric_reference.metric_families()}
        for name in ('Hostname', 'gpu'):
            q = self._variable_query(self.variables[name])
            (metric,) = promql_metrics(re.match(
                r'label_values\((.*),\s*\w+\)$', q).group(1))
            self.assertEqual(metric_reference.VENDORS,
                             by_name[metric].vendors, name)
            self.assertIn('job=~"$job"', q)
        self.assertIn('job', self._variable_query(self.variables['job']))

    def test_amd_series_next_to_the_nvidia_ones(self):
        dcgm = {key: name for key, name, _, _ in exporter.DCGM_METRICS}
        for panel in self.dashboard['panels']:
            used = set()
            for target in panel['targets']:
                used |= promql_metrics(target['expr'])
            for key, (amd_name, _) in exporter.AMD_METRICS.items():
                if dcgm.get(key) in used:
                    self.assertIn(amd_name, used, panel['title'])

    def test_variables_and_inputs(self):
        text = json.dumps(self.dashboard['panels']) + json.dumps(
            self.dashboard['templating'])
        used = set(re.findall(r'\$\{?(\w+)', text)) - {'__all'}
        self.assertEqual(set(self.variables), used)
        for inp in self.dashboard.get('__inputs', []):
            self.assertIn('${%s}' % inp['name'], text)


class TestAlertRules(testtools.TestCase):

    def test_rules_query_served_metrics_of_the_agent_job(self):
        with open(RULES) as f:
            groups = yaml.safe_load(f)['groups']
        names = metric_reference.metric_names() | {'up'}
        alerts = set()
        for group in groups:
            for rule in group['rules']:
                alerts.add(rule['alert'])
                used = promql_metrics(rule['expr'])
                self.assertTrue(used)
                self.assertEqual(set(), used - names, rule['alert'])
                for selector in re.findall(r'[\w:]+\{[^}]*\}',
                                           rule['expr']):
                    self.assertIn('job="gpu-nova-agent"', selector)
        for wanted in ('GpuUnhealthy', 'GpuXidStorm', 'GpuThermalThrottling',
                       'GpuUncorrectableEccErrors', 'GpuNovaAgentDown',
                       'GpuStateStale'):
            self.assertIn(wanted, alerts)

    def test_promql_metrics(self):
        self.assertEqual(
            {'a_b', 'c:d'},
            promql_metrics('sum by (x) (rate(a_b{job=~"$job", y="z"}[5m]))'
                           ' / on (x) group_left c:d or vector(1) > 0'))
