# SPDX-License-Identifier: Apache-2.0

"""Who the simulator acts as: its project and user.

A boot without ``project:`` belongs to this project; Nova's request
context and the RequestSpecs carry these ids.  A module of its own, with
no imports, so that anything (reservations, the Nova modules) can use
it without an import cycle.
"""

PROJECT_ID = 'simulator'
USER_ID = 'simulator'
