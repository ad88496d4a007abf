# SPDX-License-Identifier: Apache-2.0

# Sphinx configuration of the gpu-nova-ext documentation.
#
#   tox -e docs   (sphinx-build -W -b html doc/source doc/build/html)

import os
import sys

# doc/source/_exts: the metric reference (generated from the exporter) and
# the gpu: flavor key table (from the request parser's registry)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(
    __file__)), '_exts'))

project = 'gpu-nova-ext'
copyright = 'gpu-nova-ext developers'
extensions = [
    # the configuration reference, from the oslo.config.opts entry points
    'oslo_config.sphinxext',
    # the release notes, from releasenotes/notes and the git history
    'reno.sphinxext',
    'metric_reference',
    # the gpu: flavor keys, from the request parser's registry
    'flavor_keys',
    # the openstack gpu reference, from the parsers of openstack.gpu.v1
    'cliff.sphinxext',
]
autoprogram_cliff_application = 'openstack'
source_suffix = {'.rst': 'restructuredtext'}
master_doc = 'index'
exclude_patterns = []
pygments_style = 'sphinx'
html_theme = 'alabaster'
