# SPDX-License-Identifier: Apache-2.0

"""``.. gpu-nova-ext-metrics::``: the exporter's metrics as a table.

Read from the exporter itself (:mod:`gpu_nova_ext.agent.metric_reference`)
at build time, so the reference lists every metric of the code it is
built with.
"""
from docutils import statemachine
from sphinx.util import docutils as sphinx_docutils
from sphinx.util import parsing as sphinx_parsing

from gpu_nova_ext.agent import metric_reference


def _escape(text):
    return text.replace('\\', '\\\\').replace('*', '\\*').replace(
        '`', '\\`').replace('|', '\\|')


def table_lines():
    """The list-table of every metric family, as reStructuredText."""
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: 30 40 15 15', '',
             '   * - Metric', '     - Help', '     - Vendors',
             '     - Extra labels']
    base = set(metric_reference.COMMON_LABELS)
    for fam in metric_reference.metric_families():
        extra = [label for label in fam.labels if label not in base]
        lines += ['   * - ``%s``' % fam.name,
                  '     - %s' % _escape(fam.help),
                  '     - %s' % ', '.join(fam.vendors),
                  '     - %s' % (', '.join('``%s``' % label
                                           for label in extra) or '')]
    return lines


class MetricsDirective(sphinx_docutils.SphinxDirective):
    has_content = False

    def run(self):
        content = statemachine.StringList(
            table_lines(), source='<gpu-nova-ext-metrics>')
        return sphinx_parsing.nested_parse_to_nodes(self.state, content)


def setup(app):
    app.add_directive('gpu-nova-ext-metrics', MetricsDirective)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
