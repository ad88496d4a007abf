# SPDX-License-Identifier: Apache-2.0

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
