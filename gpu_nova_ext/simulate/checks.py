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

"""Type and range checks of scenario entries.

Each check raises :class:`gpu_nova_ext.exception.ScenarioError` naming the
scenario file, the entry and the fix.  Numbers are refused when they are
not finite (NaN, infinity), negative, or out of the range the entry
allows; names are refused unless they are made of a safe character set
and short enough, since they end up in file names and configuration files
of the run.
"""
import math
import re
from typing import Any

from gpu_nova_ext import exception
from gpu_nova_ext import naming
from gpu_nova_ext.operator import reservation

#: Host, flavor and server names: letters, digits, ``.``, ``_`` and ``-``,
#: starting with a letter or digit (a hostname-like word: no path
#: separator, no ``..`` at the start, no newline or ``%``).
NAME_RE = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')
MAX_NAME = 63
#: Bigger than any real count, size or ratio; keeps arithmetic exact.
MAX_NUMBER = 1e12


def kind(value: Any) -> str:
    if value is None:
        return 'nothing'
    return '%s %r' % (type(value).__name__, value)


class Checker:
    """Type checks that raise ScenarioError naming file and entry."""

    def __init__(self, path: str):
        self.path = path

    def fail(self, entry: str, reason: str) -> exception.ScenarioError:
        return exception.ScenarioError(file=self.path, entry=entry,
                                       reason=reason)

    def mapping(self, value: Any, entry: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(entry, 'expected a mapping (key: value), got %s'
                            % kind(value))
        return value

    def keys(self, value: dict, allowed: tuple, entry: str) -> None:
        for key in value:
            if key not in allowed:
                raise self.fail(
                    entry, 'unknown key %r. Allowed keys: %s. Fix the '
                    'spelling or remove it.' % (key, ', '.join(allowed)))

    def required(self, value: dict, key: str, entry: str) -> Any:
        if key not in value or value[key] is None:
            raise self.fail(entry, 'missing required key %r' % key)
        return value[key]

    def string(self, value: Any, entry: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(entry, 'expected a non-empty string, got %s'
                            % kind(value))
        return value

    def project(self, value: Any, entry: str) -> str:
        """A project id, as ``openstack gpu reservation create`` takes it."""
        value = self.string(value, entry)
        try:
            reservation.check_project_format(value)
        except exception.InvalidArgument as exc:
            raise self.fail(entry, exc.format_message())
        return value

    def name(self, value: Any, entry: str, room: int = 0) -> str:
        """A host, flavor or server name.

        ``room``: the characters a suffix added to it (``-0001``) takes.
        """
        value = self.string(value, entry)
        if not NAME_RE.fullmatch(value) or len(value) + room > MAX_NAME:
            raise self.fail(entry, '%r is not a safe name: use at most %d '
                            'letters, digits, ".", "_" and "-", starting '
                            'with a letter or digit' % (value,
                                                        MAX_NAME - room))
        return value

    def integer(self, value: Any, entry: str, minimum: int = 0,
                maximum: int = int(MAX_NUMBER)) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(entry, 'expected an integer, got %s'
                            % kind(value))
        if value < minimum:
            raise self.fail(entry, 'must be at least %d, got %d'
                            % (minimum, value))
        if value > maximum:
            raise self.fail(entry, 'must be at most %d, got %d'
                            % (maximum, value))
        return value

    def number(self, value: Any, entry: str, minimum: float = 0.0,
               maximum: float = MAX_NUMBER,
               exclusive_minimum: bool = False) -> float:
        """A finite number in [minimum, maximum] (NaN/inf refused)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(entry, 'expected a number, got %s'
                            % kind(value))
        value = float(value)
        if not math.isfinite(value):
            raise self.fail(entry, 'expected a finite number, got %r'
                            % value)
        if value < minimum or (exclusive_minimum and value == minimum):
            raise self.fail(entry, 'must be %s %g, got %g' % (
                'above' if exclusive_minimum else 'at least', minimum,
                value))
        if value > maximum:
            raise self.fail(entry, 'must be at most %g, got %g'
                            % (maximum, value))
        return value

    def choice(self, value: Any, choices: tuple, entry: str) -> str:
        if value not in choices:
            raise self.fail(entry, '%r is not one of %s'
                            % (value, ', '.join(choices)))
        return value

    def str_list(self, value: Any, entry: str) -> list[str]:
        if isinstance(value, str):
            value = [v.strip() for v in value.split(',') if v.strip()]
        if not isinstance(value, list):
            raise self.fail(entry, 'expected a list of strings, got %s'
                            % kind(value))
        return [self.string(v, '%s[%d]' % (entry, i))
                for i, v in enumerate(value)]

    def pci_address(self, value: Any, entry: str) -> str:
        try:
            return naming.normalize_pci_address(str(value))
        except ValueError:
            raise self.fail(entry, '%r is not a PCI address; write it like '
                            '"0000:3b:00.0" (quoted)' % (value,))

    def finite_values(self, value: Any, entry: str) -> None:
        """Refuse NaN and infinity anywhere in a nested value."""
        if isinstance(value, float) and not math.isfinite(value):
            raise self.fail(entry, 'expected a finite number, got %r'
                            % value)
        if isinstance(value, dict):
            for k, v in value.items():
                self.finite_values(v, '%s.%s' % (entry, k))
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self.finite_values(v, '%s[%d]' % (entry, i))
