# Sphinx configuration of the gpu-nova-ext documentation.
#
#   pip install sphinx && sphinx-build -W -b html doc/source doc/build/html

project = 'gpu-nova-ext'
copyright = 'gpu-nova-ext developers'
extensions = []
source_suffix = '.rst'
master_doc = 'index'
exclude_patterns = []
pygments_style = 'sphinx'
html_theme = 'alabaster'
