# SPDX-License-Identifier: Apache-2.0

"""``[gpu_nova_ext]`` of tempest.conf: the plugin's options.

Registered by Tempest through the plugin (``register_opts``), as every
Tempest plugin's are; listed for ``tempest`` 's sample config by
``get_opt_lists``.
"""
from oslo_config import cfg

GROUP = cfg.OptGroup(name='gpu_nova_ext',
                     title='gpu-nova-ext: GPU server tests')

OPTS = [
    cfg.ListOpt(
        'flavors', default=[],
        help='Names or IDs of the GPU flavors to test: one boot test (and '
             'one resize test) each.  Each must ask for a GPU (a gpu: key, '
             'a GPU resource class or a PCI alias), or its tests fail '
             'saying so; a private one is made accessible to the test '
             "project for the test's duration.\n\n"
             'Possible values:\n\n'
             '* empty (the default): every public flavor of the cloud that '
             'asks for a GPU, as ``openstack gpu flavor list`` lists them, '
             'read when Tempest loads the tests\n\n'
             'Related options:\n\n'
             '* ``exclude_flavors``'),
    cfg.ListOpt(
        'exclude_flavors', default=[],
        help='Names or IDs of GPU flavors never tested, such as the '
             'flavors of GPUs not installed yet: a flavor no host can take '
             'fails its boot test with NoValidHost.'),
    cfg.StrOpt(
        'cli_dir', default='',
        help="Directory holding the ``openstack`` command with "
             "gpu-nova-ext's [osc] extra, which checks each server's GPU "
             'with ``openstack gpu show``.\n\n'
             'Possible values:\n\n'
             "* empty (the default): the directory of Tempest's own "
             'Python (its venv); where it has no ``openstack``, the GPU is '
             'checked in Placement only and the test logs a warning'),
]


def register_opts(conf: cfg.ConfigOpts) -> None:
    conf.register_group(GROUP)
    conf.register_opts(OPTS, group=GROUP)


def list_opts() -> list[tuple[str, list[cfg.Opt]]]:
    return [(GROUP.name, OPTS)]
