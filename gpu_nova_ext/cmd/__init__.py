# SPDX-License-Identifier: Apache-2.0

"""Console entry points.

The agent runs on native threads: nothing here imports eventlet or
monkey-patches.  oslo.messaging is used with its ``threading`` executor.
"""
