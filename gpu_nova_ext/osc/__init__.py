# SPDX-License-Identifier: Apache-2.0

"""``openstack gpu``: the cloud-wide operator commands, as a plugin of
python-openstackclient (see :mod:`gpu_nova_ext.osc.plugin`)."""
