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
