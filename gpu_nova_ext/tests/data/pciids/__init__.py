# SPDX-License-Identifier: Apache-2.0

"""Data files (a package so that setuptools installs them as package data)."""
