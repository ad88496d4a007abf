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

"""Who the simulator acts as: its project and user.

A boot without ``project:`` belongs to this project; Nova's request
context and the RequestSpecs carry these ids.  A module of its own, with
no imports, so that anything (reservations, the Nova modules) can use
it without an import cycle.
"""

PROJECT_ID = 'simulator'
USER_ID = 'simulator'
