# SPDX-License-Identifier: Apache-2.0

"""Helpers shared by the option modules."""
from oslo_config import cfg


def register_group(conf: cfg.ConfigOpts, group: cfg.OptGroup) -> None:
    """Register a fresh copy of ``group`` on ``conf``.

    oslo.config keeps a group's options, and the overrides set on them, in
    the OptGroup object; registering one module-level OptGroup on several
    ConfigOpts would share overrides (and options keystoneauth registers)
    between them.  The simulator and the tests build many configurations
    in one process.
    """
    conf.register_group(cfg.OptGroup(group.name, title=group.title,
                                     help=group.help))
