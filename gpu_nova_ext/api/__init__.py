# SPDX-License-Identifier: Apache-2.0

"""Code nova-api loads: validators of the ``gpu:`` flavor extra specs."""
