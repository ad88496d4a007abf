# SPDX-License-Identifier: Apache-2.0

"""Tempest with our plugin, against the development cloud.

Operators run Tempest from a venv of its own (doc/source/tempest.rst);
so do we.  :func:`venv` builds it once per pin set, as
``tools/check-deploy-configs`` builds the deploy tools' venvs: under
``$GPU_NOVA_EXT_CACHE`` (default ``~/.cache/gpu-nova-ext``), a directory
named after a hash of the Python, :data:`TEMPEST`, constraints.txt,
requirements.txt and setup.cfg, marked complete when pip succeeded.  It
holds Tempest and this checkout with its ``[osc]`` extra (the
``openstack gpu`` commands the plugin checks with), installed editable:
a venv always runs the checkout it was last pointed at, and
:func:`venv` points it at this one.

:func:`write_conf` is pure: the tempest.conf of a running dev cloud
(Keystone and admin credentials from the cloud's state, the image and
flavors, no networking: the cloud's Neutron is a stand-in without
networks).  :func:`run` makes a workspace (``tempest init``), writes the
configuration and runs ``tempest run --regex '^gpu_nova_ext\\.tempest_
plugin\\.'`` under a timeout; it returns the exit code, Tempest's summary
and each test's status.

    python -m gpu_nova_ext_dev.cloud.tempest prepare   # build the venv

Design doc: Development cloud; operators' page: doc/source/tempest.rst.
"""
import configparser
import dataclasses
import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import sys
import time

TOP = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
#: the Tempest release the plugin is tested with
TEMPEST = 'tempest==47.0.0'
#: what an operator installs beside Tempest: the plugin and its CLI check
CHECKOUT_EXTRAS = '[osc]'
#: besides: what re-pointing the venv at another checkout builds with
#: (pip install -e --no-build-isolation)
BUILD_PACKAGES = ('pbr', 'setuptools', 'wheel')
#: the checkout is installed editable the PEP 660 way: its metadata (the
#: tempest.test_plugins entry point) lives in the venv.  pip's legacy way
#: for a project without pyproject.toml (setup.py develop, an egg-link)
#: keeps it in the checkout's gpu_nova_ext.egg-info, which
#: tools/install-matrix removes after its build: the next run's Tempest
#: found no plugin and ran no test ("The specified regex doesn't match
#: with anything").
EDITABLE = ('--use-pep517', '-e')
#: the plugin's tests (tempest run --regex)
TEST_REGEX = r'^gpu_nova_ext\.tempest_plugin\.'
RUN_TIMEOUT = 900
#: each step of the venv build (pip downloads most of it)
INSTALL_TIMEOUT = 1200
#: what ``tempest run`` prints last: its totals and worker balance
_SUMMARY_START = '======\nTotals\n======'


class TempestError(Exception):
    """The Tempest venv could not be built or Tempest could not run."""


def cache_dir() -> str:
    """Where cached venvs live (as tools/check-deploy-configs)."""
    return os.environ.get('GPU_NOVA_EXT_CACHE') or os.path.join(
        os.environ.get('XDG_CACHE_HOME') or os.path.expanduser('~/.cache'),
        'gpu-nova-ext')


def venv_key() -> str:
    """What the venv is built from: Python, pins, our requirements."""
    digest = hashlib.sha256(('%s %s %s %s' % (
        sys.version, TEMPEST, CHECKOUT_EXTRAS, BUILD_PACKAGES)).encode())
    for name in ('constraints.txt', 'requirements.txt', 'setup.cfg'):
        with open(os.path.join(TOP, name), 'rb') as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def _run(argv: list[str], what: str, timeout: float = INSTALL_TIMEOUT,
         **kwargs) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL,
                              **kwargs)
    except subprocess.TimeoutExpired:
        why = '%s did not finish within %ds: %s' % (
            what, timeout, ' '.join(argv))
        raise TempestError(why)
    if proc.returncode:
        why = '%s failed (exit %d): %s\n%s%s' % (
            what, proc.returncode, ' '.join(argv), proc.stdout[-3000:],
            proc.stderr[-3000:])
        raise TempestError(why)
    return proc.stdout


def _pip(venv_dir: str, *args: str) -> list[str]:
    return [os.path.join(venv_dir, 'bin', 'python'), '-m', 'pip', 'install',
            '-q', '--disable-pip-version-check', *args]


def venv() -> str:
    """Tempest's venv with this checkout in it; built once per pin set.

    Safe to call from several processes at once (a file lock): the
    first builds, the others wait and reuse it.  Building one removes
    the venvs of other pin sets.

    :raises TempestError: pip failed (the message names the step).
    """
    root = os.path.join(cache_dir(), 'tempest')
    os.makedirs(root, exist_ok=True)
    path = os.path.join(root, 'venv-%s' % venv_key())
    with open(os.path.join(root, '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(os.path.join(path, '.complete')):
            # one venv is kept: those of other pin sets go (240 MB each)
            for old in os.listdir(root):
                if old.startswith('venv-'):
                    shutil.rmtree(os.path.join(root, old),
                                  ignore_errors=True)
            _run([sys.executable, '-m', 'venv', path], 'python -m venv')
            # constraints.txt pins everything both install (the oslo
            # libraries, stestr, paramiko, cryptography...); Tempest
            # itself is not in it
            _run(_pip(path, '-c', os.path.join(TOP, 'constraints.txt'),
                      TEMPEST, *BUILD_PACKAGES, '-e', TOP + CHECKOUT_EXTRAS),
                 'installing %s and %s%s' % (TEMPEST, TOP, CHECKOUT_EXTRAS))
            _install_checkout(path)
            open(os.path.join(path, '.complete'), 'w').close()
        elif _checkout_of(path) != TOP or not _plugin_installed(path):
            # another checkout's venv (same pins), or one whose plugin
            # metadata went: point it at this checkout
            _install_checkout(path)
    return path


def _install_checkout(venv_dir: str) -> None:
    """This checkout into the venv, editable, with the venv's pbr."""
    _run(_pip(venv_dir, '--no-deps', '--no-build-isolation', *EDITABLE,
              TOP), 'installing %s (editable)' % TOP)
    _mark_checkout(venv_dir)


def _plugin_installed(venv_dir: str) -> bool:
    """Whether the venv's Tempest finds our plugin's entry point."""
    probe = ('import importlib.metadata as m, sys; sys.exit(0 if any('
             'e.value.startswith("gpu_nova_ext.") for e in m.entry_points('
             'group="tempest.test_plugins")) else 1)')
    return subprocess.run(
        [os.path.join(venv_dir, 'bin', 'python'), '-c', probe],
        stdin=subprocess.DEVNULL, capture_output=True,
        timeout=INSTALL_TIMEOUT).returncode == 0


def _checkout_of(venv_dir: str) -> str | None:
    try:
        with open(os.path.join(venv_dir, '.checkout')) as f:
            return f.read().strip()
    except OSError:
        return None


def _mark_checkout(venv_dir: str) -> None:
    with open(os.path.join(venv_dir, '.checkout'), 'w') as f:
        f.write(TOP + '\n')


# -- the configuration (pure) --------------------------------------------


@dataclasses.dataclass(kw_only=True, slots=True, frozen=True)
class CloudRefs:
    """What tempest.conf names of the cloud besides its state file."""

    image_id: str
    flavor_id: str                  # [compute] flavor_ref (any flavor)
    exclude_flavors: tuple[str, ...] = ()


def write_conf(info: dict, refs: CloudRefs, region: str,
               build_timeout: int = 300) -> str:
    """tempest.conf of the dev cloud whose state is ``info``.  No I/O.

    Admin credentials for Tempest's dynamic credentials (a project and
    users per test class, removed after it); no networking (Neutron
    service off for Tempest, so it creates no networks and boots with
    ``networks: none``); no validation over SSH; resize on (the cloud's
    servers have disk files and may resize on their host).
    """
    conf = configparser.ConfigParser(interpolation=None)
    conf.optionxform = str
    sections = {
        'DEFAULT': {'log_file': 'tempest.log', 'debug': 'True'},
        'auth': {
            'use_dynamic_credentials': 'True',
            'admin_username': 'admin',
            'admin_password': info['admin_password'],
            'admin_project_name': 'admin',
            'admin_domain_name': 'Default',
            'create_isolated_networks': 'False',
        },
        'identity': {
            'uri_v3': info['keystone_url'] + '/v3',
            'auth_version': 'v3',
            'region': region,
        },
        'identity-feature-enabled': {'api_v2': 'False'},
        'service_available': {
            'nova': 'True', 'glance': 'True', 'neutron': 'False',
            'cinder': 'False', 'swift': 'False', 'horizon': 'False',
        },
        'compute': {
            'image_ref': refs.image_id,
            'flavor_ref': refs.flavor_id,
            'max_microversion': 'latest',
            'build_timeout': str(build_timeout),
        },
        'compute-feature-enabled': {'resize': 'True'},
        'placement': {'max_microversion': 'latest'},
        'validation': {'run_validation': 'False'},
        'gpu_nova_ext': {
            'exclude_flavors': ','.join(refs.exclude_flavors),
        },
    }
    for name, options in sections.items():
        if name != 'DEFAULT':
            conf.add_section(name)
        for key, value in options.items():
            conf.set(name, key, value)
    out = io.StringIO()
    conf.write(out)
    return out.getvalue()


# -- running it ------------------------------------------------------------


@dataclasses.dataclass(kw_only=True, slots=True)
class TempestResult:
    returncode: int
    summary: str                    # Tempest's totals, as it prints them
    tests: dict[str, str]           # test id -> success, fail, skip...
    log: str                        # Tempest's output, in the workspace
    seconds: float

    def with_status(self, status: str) -> list[str]:
        return sorted(t for t, s in self.tests.items() if s == status)


def summary_of(output: str) -> str:
    """The totals ``tempest run`` prints last, or its last lines."""
    at = output.rfind(_SUMMARY_START)
    if at >= 0:
        return output[at:].strip()
    return '\n'.join(output.strip().splitlines()[-15:])


def test_statuses(subunit_stream: bytes) -> dict[str, str]:
    """Test id -> status of a subunit v2 stream (``stestr last``)."""
    import subunit
    import testtools

    out: dict[str, str] = {}

    def on_test(test):
        out[test['id']] = test['status']

    result = testtools.StreamToDict(on_test)
    result.startTestRun()
    try:
        subunit.ByteStreamToStreamResult(
            io.BytesIO(subunit_stream),
            non_subunit_name='stdout').run(result)
    finally:
        result.stopTestRun()
    return out


def run(info: dict, refs: CloudRefs, workspace: str, region: str,
        timeout: float = RUN_TIMEOUT) -> TempestResult:
    """Run the plugin's tests against the cloud ``info`` describes.

    ``workspace``: a new directory (Tempest's workspace, logs included).

    :raises TempestError: the venv could not be built, ``tempest init``
        failed, or ``tempest run`` did not end within ``timeout``.
    """
    path = venv()
    tempest = os.path.join(path, 'bin', 'tempest')
    env = {k: v for k, v in os.environ.items() if not k.startswith('OS_')}
    env['PATH'] = os.pathsep.join([os.path.join(path, 'bin'),
                                   env.get('PATH', '')])
    # Tempest keeps a list of workspaces; this one's stays with it
    registry = os.path.join(workspace + '.workspaces.yaml')
    _run([tempest, 'init', '--workspace-path', registry, workspace],
         'tempest init', timeout=120, env=env)
    with open(os.path.join(workspace, 'etc', 'tempest.conf'), 'w') as f:
        f.write(write_conf(info, refs, region))
    log = os.path.join(workspace, 'tempest-run.log')
    started = time.monotonic()
    with open(log, 'w') as out:
        try:
            rc = subprocess.call(
                [tempest, 'run', '--concurrency', '1', '--regex',
                 TEST_REGEX], cwd=workspace, env=env, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                timeout=timeout)
        except subprocess.TimeoutExpired:
            why = 'tempest run did not end within %ds; see %s' % (
                timeout, log)
            raise TempestError(why)
    seconds = time.monotonic() - started
    with open(log, errors='replace') as f:
        output = f.read()
    stream = subprocess.run(
        [os.path.join(path, 'bin', 'stestr'), 'last', '--subunit'],
        cwd=workspace, env=env, capture_output=True, timeout=120).stdout
    return TempestResult(returncode=rc, summary=summary_of(output),
                         tests=test_statuses(stream), log=log,
                         seconds=seconds)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ['prepare']:
        print('usage: python -m gpu_nova_ext_dev.cloud.tempest prepare',
              file=sys.stderr)
        return 2
    started = time.monotonic()
    try:
        path = venv()
    except TempestError as exc:
        print('the Tempest venv could not be built: %s' % exc,
              file=sys.stderr)
        return 1
    print('Tempest venv: %s (%.0fs)' % (path, time.monotonic() - started))
    return 0


if __name__ == '__main__':
    sys.exit(main())
