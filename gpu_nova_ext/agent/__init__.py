# SPDX-License-Identifier: Apache-2.0

"""The compute-host GPU agent: the periodic cycle (service), the state
payload it casts, and (monitor) metric sampling and health judgement.

Native threads only: nothing here imports eventlet or monkey-patches.
"""
