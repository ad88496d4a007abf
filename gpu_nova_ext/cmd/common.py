"""What every console entry point shares: config loading, logging, and
turning typed errors into one line and exit code 2."""
import argparse
from collections.abc import Callable
import sys
import traceback

from oslo_config import cfg
from oslo_log import log as logging

from gpu_nova_ext import conf as gconf
from gpu_nova_ext import exception

PROJECT = 'gpu-nova-ext'
EXIT_ERROR = 2


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


def load_config(args: argparse.Namespace, prog: str,
                register: Callable[[cfg.ConfigOpts], None] = (
                    gconf.register_opts)) -> cfg.ConfigOpts:
    """Build a ConfigOpts from the command's --config-file/--config-dir."""
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
    conf(cli_args, project=PROJECT, prog=prog,
         default_config_files=[] if args.config_file else None,
         default_config_dirs=[] if args.config_dir else None)
    if args.debug:
        conf.set_override('debug', True)
    validate_all(conf)
    logging.setup(conf, prog)
    return conf


def validate_all(conf: cfg.ConfigOpts) -> None:
    """Read every registered option once.

    oslo.config parses values lazily; reading them all at start turns a bad
    value (``mode = sideways``) into an error naming the option now rather
    than in the middle of a cycle.
    """
    for name in list(conf):
        value = getattr(conf, name)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt_name in list(value):
                try:
                    getattr(value, opt_name)
                except cfg.NoSuchOptError:
                    pass


def run_guarded(func: Callable[[], int | None], debug: bool,
                prog: str) -> int:
    """Run ``func``; typed and config errors become one line and exit 2."""
    try:
        return func() or 0
    except exception.GpuNovaExtException as exc:
        message = exc.format_message()
    except cfg.ConfigFilesNotFoundError as exc:
        message = ('configuration file(s) not found: %s. Pass an existing '
                   'file with --config-file.' % ', '.join(exc.config_files))
    except cfg.Error as exc:
        message = 'configuration error: %s' % exc
    except KeyboardInterrupt:
        return 130
    if debug:
        traceback.print_exc()
    print('%s: error: %s' % (prog, message), file=sys.stderr)
    return EXIT_ERROR
