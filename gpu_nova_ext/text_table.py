# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Columns of text: the one table renderer of ``gpu-nova-ext``'s output.

``discover`` and ``simulate`` print their tables through it (the
``openstack gpu`` commands print through cliff's formatters).  It uses
prettytable, the library cliff's own table formatter uses, in its plain
columns style: left-aligned columns two spaces apart, the header first,
no trailing blanks.
"""
from prettytable import PrettyTable
from prettytable import TableStyle


def lines(headers, rows) -> list[str]:
    """The table of ``rows`` under ``headers``, one string per line."""
    table = PrettyTable([str(h) for h in headers])
    table.set_style(TableStyle.PLAIN_COLUMNS)
    table.align = 'l'
    table.left_padding_width = 0
    table.right_padding_width = 2
    for row in rows:
        table.add_row([str(cell) for cell in row])
    return [line.rstrip() for line in table.get_string().splitlines()]
