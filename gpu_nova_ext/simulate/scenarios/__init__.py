"""Data files (a package so that setuptools installs them as package data)."""
