# SPDX-License-Identifier: Apache-2.0

"""The base classes of the ``openstack gpu`` commands.

osc-lib's Command, Lister and ShowOne, each with the rule of every
gpu-nova-ext command: a typed error (bad input, a service that refuses)
is one line on stderr naming the thing and the fix, and exit code 2;
``openstack --debug`` adds the traceback.  Output goes through cliff's
formatters (``-f table|json|yaml|value|csv``, ``-c COLUMN``).
"""
import logging
import sys
import traceback

from keystoneauth1 import exceptions as ks_exc
from openstack import exceptions as os_exc
from osc_lib.cli import format_columns
from osc_lib.command import command
from oslo_config import cfg

from gpu_nova_ext.cmd import common
from gpu_nova_ext import exception

LOG = logging.getLogger(__name__)


def error_line(exc: BaseException) -> str:
    """The one line said for a typed or service error."""
    if isinstance(exc, exception.GpuNovaExtException):
        return exc.format_message()
    if isinstance(exc, cfg.ConfigFilesNotFoundError):
        return ('configuration file(s) not found: %s. Pass an existing '
                'file with --config-file.' % ', '.join(exc.config_files))
    if isinstance(exc, cfg.Error):
        return 'configuration error: %s' % exc
    if isinstance(exc, ks_exc.Unauthorized):
        return ('the cloud refused the credentials: %s. Check the cloud '
                'of clouds.yaml (--os-cloud) or the OS_* variables.' % exc)
    return ('%s. Check that the service runs and that the account is an '
            'admin of the cloud.' % str(exc).rstrip('.'))


class _Guarded:
    """``run`` turning the errors of :func:`error_line` into exit code 2."""

    #: what ``run`` catches; anything else is a bug and keeps cliff's
    #: traceback handling
    CAUGHT = (exception.GpuNovaExtException, cfg.Error,
              ks_exc.ClientException, os_exc.SDKException)

    def run(self, parsed_args):
        try:
            return super().run(parsed_args)
        except self.CAUGHT as exc:
            if self.app.options.debug:
                traceback.print_exception(exc, file=sys.stderr)
            # one line, whatever the service's message holds
            self.app.stderr.write('openstack %s: error: %s\n' % (
                self.cmd_name, ' '.join(error_line(exc).split())))
            return common.EXIT_ERROR


class Command(_Guarded, command.Command):
    """A command that changes something and says what it did."""

    def say(self, line: str) -> None:
        self.app.stdout.write(line + '\n')
        self.app.stdout.flush()


class Lister(_Guarded, command.Lister):
    """A command whose answer is rows."""


class ShowOne(_Guarded, command.ShowOne):
    """A command whose answer is one record."""


def add_config_arg(parser) -> None:
    """``--config-file``: gpu-nova-ext's options for this command."""
    parser.add_argument(
        '--config-file', action='append', default=[], metavar='<file>',
        help="gpu-nova-ext configuration file (oslo.config) with the "
             "schedulers' transport_url and [remediation]; may be "
             'repeated. Credentials never come from it: the cloud of '
             'clouds.yaml or OS_* is used for every service.')


def add_scope_args(parser, what: str) -> None:
    """--model and --aggregate: which of the cloud's GPUs ``what`` covers."""
    parser.add_argument('--model', metavar='<model>',
                        help='Only %s with GPUs of this model (A100 '
                             'matches A100_80GB_PCIE).' % what)
    parser.add_argument('--aggregate', metavar='<aggregate>',
                        help='Only %s of the hosts of this Nova host '
                             'aggregate (name or id).' % what)


def formattable(value):
    """``value`` as cliff shows it: lines in a table, itself in JSON."""
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return format_columns.ListDictColumn(value)
    if isinstance(value, dict):
        return format_columns.DictColumn(value)
    if isinstance(value, (list, tuple)):
        return format_columns.ListColumn(list(value))
    return value


def record(data: dict) -> tuple[tuple, tuple]:
    """A ShowOne answer of a report's dict; ``-f json`` gives its keys."""
    keys = tuple(data)
    return keys, tuple(formattable(data[k]) for k in keys)
