# SPDX-License-Identifier: Apache-2.0
"""The development cloud (tools/run cloud)."""
