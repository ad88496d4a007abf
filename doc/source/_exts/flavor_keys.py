# SPDX-License-Identifier: Apache-2.0

"""``.. gpu-nova-ext-flavor-keys::``: the ``gpu:`` flavor keys as a table.

Read from the request parser's registry
(:data:`gpu_nova_ext.scheduler.request.KEYS`) at build time, the one
definition nova-api's validators, the filters and ``openstack gpu flavor
create`` read too, so the table lists every key and value of the code it
is built with.
"""
from docutils import statemachine
from sphinx.util import docutils as sphinx_docutils
from sphinx.util import parsing as sphinx_parsing

from gpu_nova_ext.operator import flavor
from gpu_nova_ext.scheduler import request


def _escape(text):
    return text.replace('\\', '\\\\').replace('*', '\\*').replace(
        '`', '\\`').replace('|', '\\|').replace('_', '\\_')


def _values(key):
    """The value cell's lines.

    Each enumerated value and its meaning, or the rule of a free-form
    value and samples of it.
    """
    if key.values and not any(meaning for _value, meaning in key.values):
        return [' | '.join('``%s``' % value for value in key.choices)]
    if key.values:
        return ['* ``%s``: %s' % (value, _escape(meaning))
                for value, meaning in key.values]
    return ['%s; for example %s' % (
        _escape(key.allowed),
        ', '.join('``%s``' % value for value in key.examples))]


def table_lines():
    """The list-table of every ``gpu:`` key, as reStructuredText."""
    lines = ['.. list-table::', '   :header-rows: 1',
             '   :widths: 20 45 20 15', '',
             '   * - Key', '     - Values', '     - Meaning',
             '     - Enforced by']
    for key in request.KEYS.values():
        cell = _values(key)
        option = '--' + flavor.attribute(key).replace('_', '-')
        lines += ['   * - ``%s`` (``%s``)' % (key.name, option),
                  '     - ' + cell[0]]
        lines += ['       ' + line for line in cell[1:]]
        lines += ['     - %s' % _escape(key.help),
                  '     - %s' % key.filter]
    return lines


class FlavorKeysDirective(sphinx_docutils.SphinxDirective):
    has_content = False

    def run(self):
        content = statemachine.StringList(
            table_lines(), source='<gpu-nova-ext-flavor-keys>')
        return sphinx_parsing.nested_parse_to_nodes(self.state, content)


def setup(app):
    app.add_directive('gpu-nova-ext-flavor-keys', FlavorKeysDirective)
    return {'parallel_read_safe': True, 'parallel_write_safe': True}
