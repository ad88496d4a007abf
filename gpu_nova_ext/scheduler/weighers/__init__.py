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

"""GPU host weighers, loaded by nova-scheduler (doc/source/nova-config)."""
from gpu_nova_ext.scheduler import filters

NAMESPACE = 'gpu_nova_ext.scheduler.weighers'


def all_weighers() -> list[type]:
    """Every class registered in ``gpu_nova_ext.scheduler.weighers``."""
    return filters.load_classes(NAMESPACE)
