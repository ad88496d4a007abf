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

"""openstacksdk pointed at the API of Nova's functional harness."""
from keystoneauth1 import noauth
from keystoneauth1 import session as ks_session
import openstack


def harness_connection(testcase) -> openstack.connection.Connection:
    """What clouds.yaml gives openstacksdk, aimed at the harness's API.

    The harness authenticates by these headers (Keystone is stubbed).
    """
    sess = ks_session.Session(
        auth=noauth.NoAuth(),
        additional_headers={
            'X-Auth-User': 'admin',
            'X-Auth-Project-Id': testcase.api.project_id,
            'X-Roles': 'reader,member,admin'})
    return openstack.connection.Connection(
        session=sess, compute_endpoint_override=testcase.api_fixture.base_url,
        placement_endpoint_override=testcase.placement.fixture.endpoint)
