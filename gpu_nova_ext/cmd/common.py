# SPDX-License-Identifier: Apache-2.0

"""What every console entry point shares: config loading, logging, and
turning typed errors into one line and exit code 2."""
import argparse
from collections.abc import Callable
import contextlib
import glob
import importlib.metadata
import io
import os
import re
import sys
import traceback
import warnings

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception

PROJECT = 'gpu-nova-ext'
EXIT_ERROR = 2


def use_native_threads() -> None:
    """Native threads in our own processes, without eventlet's banner.

    oslo.messaging imports oslo.service, whose default backend is
    eventlet's; the agent and the CLI run native threads, so they select
    the threading backend before anything imports oslo.messaging.
    eventlet is still imported (futurist imports it whenever it is
    installed, and Nova needs it installed) and would print its
    deprecation banner at every ``report --cast`` or ``audit
    --state-wait``: that one warning is filtered.  Only the console entry
    points call this (``main()`` without ``argv``): inside another process
    (a test run, nova-scheduler) the process's own choices stand.
    """
    warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
    from oslo_service import backend
    if backend.get_backend_type() is None:
        backend.init_backend(backend.BackendType.THREADING)


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        '--config-file', action='append', default=[], metavar='FILE',
        help='Configuration file (oslo.config); may be repeated.')
    parser.add_argument(
        '--config-dir', action='append', default=[], metavar='DIR',
        help='Directory of *.conf files read after --config-file.')
    parser.add_argument(
        '--debug', action='store_true',
        help='Log at DEBUG and print tracebacks of errors.')
    parser.add_argument(
        '--version', action='version',
        version='%(prog)s ' + version(),
        help='Print the version of gpu-nova-ext and exit.')


def version() -> str:
    """The installed distribution's version.

    pbr wrote it at build time: setup.cfg's ``version``, with ``.devN`` on
    an untagged commit.
    """
    try:
        return importlib.metadata.version(PROJECT)
    except importlib.metadata.PackageNotFoundError:
        return 'unknown (run from a source tree that is not installed)'


def load_config(args: argparse.Namespace, prog: str,
                register: Callable[[cfg.ConfigOpts], None] = (
                    gconf.register_opts)) -> cfg.ConfigOpts:
    """Build a ConfigOpts from the command's --config-file/--config-dir."""
    check_config_files(args.config_file, args.config_dir)
    conf = cfg.ConfigOpts()
    register(conf)
    logging.register_options(conf)
    # Commands print their results (tables, JSON) on stdout: logs go to
    # stderr unless a log file is configured.
    conf.set_default('use_stderr', True)
    cli_args = []
    for path in args.config_file:
        cli_args += ['--config-file', path]
    for path in args.config_dir:
        cli_args += ['--config-dir', path]
    said = io.StringIO()
    try:
        with contextlib.redirect_stderr(said):
            conf(cli_args, project=PROJECT, prog=prog,
                 default_config_files=[] if args.config_file else None,
                 default_config_dirs=[] if args.config_dir else None)
    except SystemExit:
        # oslo.config writes a bad file value of a command-line option
        # ("argument --debug: Invalid Boolean value: maybe") and exits
        raise exception.ConfigError(reason=(
            '%s (in %s)' % (said.getvalue().strip().replace(
                'argument --', '[DEFAULT] '), ', '.join(
                    args.config_file + args.config_dir) or 'the default '
                'configuration files')))
    sys.stderr.write(said.getvalue())
    if args.debug:
        conf.set_override('debug', True)
    validate_all(conf)
    logging.setup(conf, prog)
    return conf


def check_config_files(files: list[str], dirs: list[str]) -> None:
    """Refuse, naming it, a configuration file oslo.config would crash on.

    A directory given as --config-file, a file that is not UTF-8 text or
    cannot be read.  A missing --config-file is left to oslo.config (its
    ConfigFilesNotFoundError names it).
    """
    for path in files:
        if os.path.isdir(path):
            raise exception.ConfigError(reason=(
                '--config-file %s is a directory: name a file, or pass the '
                'directory with --config-dir' % path))
    for directory in dirs:
        if os.path.isdir(directory):
            files = files + sorted(glob.glob(os.path.join(directory,
                                                          '*.conf')))
    for path in files:
        if not os.path.exists(path):
            continue
        try:
            with open(path, 'rb') as f:
                data = f.read()
        except OSError as exc:
            raise exception.ConfigError(reason=(
                'cannot read configuration file %s: %s'
                % (path, exc.strerror or exc)))
        try:
            data.decode('utf-8')
        except UnicodeDecodeError as exc:
            line = data[:exc.start].count(b'\n') + 1
            raise exception.ConfigError(reason=(
                'configuration file %s is not UTF-8 text (byte 0x%02x on '
                'line %d): save it as UTF-8' % (path, data[exc.start], line)))


def _bad_value(conf, group: str | None, name: str,
               exc: cfg.ConfigFileValueError) -> exception.ConfigError:
    """One line naming the option, its group and file for a bad value.

    oslo.config's own message shows a LocationInfo(...) repr and no group.
    """
    # (conf.get_location() raises the same error again)
    found = re.search(r"detail='([^']*)'", str(exc))
    where = ' in %s' % found.group(1) if found else ''
    reason = str(exc).partition(' is not valid: ')[2] or str(exc)
    return exception.ConfigError(reason=(
        'invalid value for [%s] %s%s: %s' % (
            group or 'DEFAULT', name, where, reason)))


def validate_all(conf: cfg.ConfigOpts) -> None:
    """Read every registered option once.

    oslo.config parses values lazily; reading them all at start turns a bad
    value (``mode = sideways``) into an error naming the option now rather
    than in the middle of a cycle.
    """
    for name in list(conf):
        try:
            value = getattr(conf, name)
        except cfg.ConfigFileValueError as exc:
            raise _bad_value(conf, None, name, exc)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt_name in list(value):
                try:
                    getattr(value, opt_name)
                except cfg.NoSuchOptError:
                    pass
                except cfg.ConfigFileValueError as exc:
                    raise _bad_value(conf, name, opt_name, exc)


def run_guarded(func: Callable[[], int | None], debug: bool,
                prog: str) -> int:
    """Run ``func``; typed and config errors become one line and exit 2."""
    try:
        return func() or 0
    except exception.GpuNovaExtException as exc:
        error, message = exc, exc.format_message()
    except cfg.ConfigFilesNotFoundError as exc:
        error, message = exc, (
            'configuration file(s) not found: %s. Pass an existing '
            'file with --config-file.' % ', '.join(exc.config_files))
    except cfg.Error as exc:
        error, message = exc, 'configuration error: %s' % exc
    except KeyboardInterrupt:
        return 130
    if debug:
        traceback.print_exception(error)
    print('%s: error: %s' % (prog, message), file=sys.stderr)
    return EXIT_ERROR
