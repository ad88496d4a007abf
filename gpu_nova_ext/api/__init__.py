"""Code nova-api loads: validators of the ``gpu:`` flavor extra specs."""
