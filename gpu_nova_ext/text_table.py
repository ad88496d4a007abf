# SPDX-License-Identifier: Apache-2.0

"""The output of ``gpu-nova-ext``'s commands: one renderer, cliff's options.

``discover``, ``mig plan`` and ``simulate`` print through
:func:`emit` and take :func:`add_arguments`' options, which mean what
cliff's formatters mean in the ``openstack gpu`` commands (design doc:
Operator CLI):

* ``-f/--format table`` (default): for people; ``json`` and ``yaml``: the
  command's whole document (the keys ``--format json`` always gave);
  ``csv``: a header of column names, then a row per item; ``value``: the
  cells of each row, space-separated, no header;
* ``-c/--column COLUMN`` (repeatable): only those columns, in the
  command's order; ``json``/``yaml`` then print the rows as objects of
  those columns, as cliff does.

cliff itself is not a runtime requirement (a compute host runs
``gpu-nova-ext`` without python-openstackclient), so the choice is made
here, over prettytable, the library cliff's own table formatter uses, in
its plain columns style: left-aligned columns two spaces apart, the header
first, no trailing blanks.
"""
from collections.abc import Callable
from collections.abc import Sequence
import csv
import dataclasses
import io
import json
import sys
from typing import Any

from prettytable import PrettyTable
from prettytable import TableStyle
import yaml

from gpu_nova_ext import exception

FORMATS = ('table', 'json', 'yaml', 'csv', 'value')
#: what the table and ``value`` print for a missing value
MISSING = '-'
#: how far a row's detail rows are indented under it
DETAIL_INDENT = 4


def lines(headers, rows, details=None) -> list[str]:
    """The table of ``rows`` under ``headers``, one string per line.

    ``details[i]`` (optional) are rows printed indented under ``rows[i]``,
    headerless, in columns of their own shared by all details.
    """
    if not rows:
        # prettytable prints nothing for a borderless table without rows
        return ['  '.join(str(h) for h in headers).rstrip()]
    table = _plain([str(h) for h in headers], rows)
    text = [line.rstrip() for line in table.get_string().splitlines()]
    if not details or not any(details):
        return text
    width = max(len(row) for group in details for row in group)
    sub = _plain(['%d' % i for i in range(width)],
                 [list(row) + [''] * (width - len(row))
                  for group in details for row in group])
    sub_lines = iter(' ' * DETAIL_INDENT + line.rstrip() for line in
                     sub.get_string(header=False).splitlines())
    out = text[:1]
    for i, line in enumerate(text[1:]):
        out.append(line)
        out += [next(sub_lines) for _ in (
            details[i] if i < len(details) else ())]
    return out


def _plain(headers, rows) -> PrettyTable:
    table = PrettyTable(headers)
    table.set_style(TableStyle.PLAIN_COLUMNS)
    table.align = 'l'
    table.left_padding_width = 0
    table.right_padding_width = 2
    for row in rows:
        table.add_row([_cell(cell) for cell in row])
    return table


def _cell(value) -> str:
    return MISSING if value is None else str(value)


def heading(column: str) -> str:
    """A column's table header: ``pci_address`` -> ``PCI ADDRESS``."""
    return column.replace('_', ' ').upper()


def to_json(document, sort_keys: bool = True) -> str:
    """Strict JSON: NaN or infinity raise ValueError, not written."""
    return json.dumps(document, indent=2, sort_keys=sort_keys,
                      allow_nan=False)


def to_csv(columns, rows) -> str:
    """A header of ``columns``, then one line per row; None is empty."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator='\n')
    writer.writerow(columns)
    for row in rows:
        writer.writerow(['' if cell is None else cell for cell in row])
    return out.getvalue()


def add_arguments(parser, document: str, rows: str) -> None:
    """``-f/--format`` and ``-c/--column``, as cliff's formatters take them.

    :param document: what ``json``/``yaml`` print, for the help text.
    :param rows: what a row of ``csv``/``value`` stands for.
    """
    parser.add_argument(
        '-f', '--format', choices=FORMATS, default='table',
        help='Output format (default: table, for people). json, yaml: %s. '
             'csv (under a header of column names), value (the cells '
             'only): %s.' % (document, rows))
    parser.add_argument(
        '-c', '--column', action='append', dest='columns', default=[],
        metavar='COLUMN',
        help='Only this column (repeat for more), as csv names it or as '
             'the table heads it.')


@dataclasses.dataclass(kw_only=True, slots=True)
class Listing:
    """What a command prints, in every format.

    ``columns`` name the cells of each of ``rows`` (lower-case keys, as
    ``csv`` heads them; the table heads them with :func:`heading`).  The
    table adds ``title`` above, ``details`` (per row, indented under it),
    ``empty`` when there are no rows, and ``messages`` (warnings, notes)
    below; ``csv`` and ``value`` write the messages to stderr.  ``json``
    and ``yaml`` print ``document`` (which holds the messages), or the rows
    as objects when it is None or columns were chosen.  ``report``, when
    set, is the whole table format unless columns were chosen (a report of
    several tables, as ``simulate`` prints).
    """

    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]
    details: Sequence[Sequence[Sequence[Any]]] | None = None
    title: Sequence[str] = ()
    empty: str = ''
    messages: Sequence[str] = ()
    document: Any = None
    sort_keys: bool = True
    report: Callable[[], str] | None = None

    def select(self, names: Sequence[str]) -> list[int]:
        """The indexes of the columns ``-c`` named; unknown: ConfigError."""
        if not names:
            return list(range(len(self.columns)))
        known = {_key(c): i for i, c in enumerate(self.columns)}
        unknown = [n for n in names if _key(n) not in known]
        if unknown:
            raise exception.ConfigError(reason=(
                '-c %s: no such column; choose from %s' % (
                    ', '.join(unknown), ', '.join(self.columns))))
        wanted = {known[_key(n)] for n in names}
        return [i for i in range(len(self.columns)) if i in wanted]


def _key(name: str) -> str:
    return name.strip().lower().replace(' ', '_').replace('-', '_')


def emit(args, listing: Listing, out=None, err=None) -> None:
    """Print ``listing`` as ``args.format`` and ``args.columns`` ask."""
    out = out or sys.stdout
    err = err or sys.stderr
    fmt = args.format
    chosen = list(getattr(args, 'columns', None) or [])
    picks = listing.select(chosen)
    columns = [listing.columns[i] for i in picks]
    rows = [[row[i] for i in picks] for row in listing.rows]
    if fmt == 'table':
        if listing.report is not None and not chosen:
            text = listing.report()
        else:
            body = lines([heading(c) for c in columns], rows,
                         listing.details)
            if not rows and listing.empty:
                body.append(listing.empty)
            text = '\n'.join(list(listing.title) + body +
                             list(listing.messages))
        out.write(text + '\n')
        return
    if fmt in ('json', 'yaml'):
        if listing.document is not None and not chosen:
            document = listing.document
        else:
            document = [dict(zip(columns, row)) for row in rows]
            _to_stderr(listing, err)
        if fmt == 'json':
            out.write(to_json(document, listing.sort_keys) + '\n')
        else:
            out.write(yaml.safe_dump(document, default_flow_style=False,
                                     sort_keys=listing.sort_keys,
                                     allow_unicode=True))
        return
    _to_stderr(listing, err)
    if fmt == 'csv':
        out.write(to_csv(columns, rows))
    else:
        for row in rows:
            out.write(' '.join(_cell(cell) for cell in row) + '\n')


def _to_stderr(listing: Listing, err) -> None:
    for message in listing.messages:
        err.write(message + '\n')
