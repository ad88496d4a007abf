"""Placement side of the agent: client, pure translation, reporter, and
the embedded Placement and nova-compute stand-ins the simulator uses."""
