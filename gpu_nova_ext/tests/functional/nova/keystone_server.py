# SPDX-License-Identifier: Apache-2.0

"""A real Keystone for the functional tests, in a process of its own.

Run as ``python -m gpu_nova_ext.tests.functional.nova.keystone_server DIR``:
it writes ``DIR/keystone.conf`` (SQLite, Fernet keys under DIR), runs
``keystone-manage db_sync``, ``fernet_setup`` and ``bootstrap`` (user
``admin`` with the admin role on the system and on project ``admin``,
region ``RegionOne``), then serves Keystone's own Flask application on
127.0.0.1 and prints ``PORT <n>`` on stdout once it answers.  It exits
when its standard input closes (the test process ended, however).

Why a process of its own: Keystone and Nova both register options on
oslo.config's global ``cfg.CONF`` and some collide (``[api]
response_validation``), so the two cannot be configured in one process.
"""
import os
import socketserver
import subprocess
import sys
import threading
from wsgiref import simple_server

from gpu_nova_ext_dev.cloud import keystone_options

PASSWORD = 'keystone-secret'
REGION = 'RegionOne'

CONF = """
[database]
connection = sqlite:///%(dir)s/keystone.db
[fernet_tokens]
key_repository = %(dir)s/fernet-keys
[oslo_policy]
enforce_scope = true
enforce_new_defaults = true
""" + ''.join('[%s]\n%s' % (section, ''.join(
    '%s = %s\n' % opt for opt in opts.items()))
    for section, opts in keystone_options.DEV_OPTIONS.items())


class _Server(socketserver.ThreadingMixIn, simple_server.WSGIServer):
    daemon_threads = True


class _Quiet(simple_server.WSGIRequestHandler):
    def log_message(self, *args):
        pass


def _unavailable(environ, start_response):
    start_response('503 Service Unavailable', [])
    return [b'']


def _exit_with_parent() -> None:
    """Stop when the test process goes: its end of our stdin closes."""
    sys.stdin.read()
    os._exit(0)


def main(directory: str) -> None:
    threading.Thread(target=_exit_with_parent, daemon=True).start()
    # Keystone parses sys.argv as its command line
    sys.argv = sys.argv[:1]
    conf = os.path.join(directory, 'keystone.conf')
    with open(conf, 'w') as f:
        f.write(CONF % {'dir': directory})
    server = simple_server.make_server(
        '127.0.0.1', 0, _unavailable, server_class=_Server,
        handler_class=_Quiet)
    port = server.server_address[1]
    manage = [os.path.join(os.path.dirname(sys.executable),
                           'keystone-manage'), '--config-file', conf]
    ids = ['--keystone-user', str(os.getuid()),
           '--keystone-group', str(os.getgid())]
    # each step done is said on stdout: the test process waits for each
    # within its deadline (on a busy machine each takes a while)
    subprocess.check_call(manage + ['db_sync'], stdout=sys.stderr)
    print('STEP db_sync', flush=True)
    subprocess.check_call(manage + ['fernet_setup'] + ids,
                          stdout=sys.stderr)
    print('STEP fernet_setup', flush=True)
    subprocess.check_call(manage + [
        'bootstrap', '--bootstrap-password', PASSWORD,
        '--bootstrap-region-id', REGION,
        '--bootstrap-public-url', 'http://127.0.0.1:%d/v3' % port],
        stdout=sys.stderr)
    print('STEP bootstrap', flush=True)
    from keystone.server.flask import core
    server.set_app(core.initialize_application('public',
                                               config_files=[conf]))
    print('PORT %d' % port, flush=True)
    server.serve_forever()


if __name__ == '__main__':
    main(sys.argv[1])
