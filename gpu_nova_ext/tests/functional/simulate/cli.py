# SPDX-License-Identifier: Apache-2.0

"""``gpu-nova-ext simulate`` on a scenario dict, in a process of its own."""
import os
import subprocess
import sys
import tempfile

import yaml

from gpu_nova_ext.tests import deadline


def simulate(scenario: dict, *args: str) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of simulating ``scenario``."""
    with tempfile.NamedTemporaryFile('w', suffix='.yaml',
                                     delete=False) as f:
        yaml.safe_dump(scenario, f)
    try:
        proc = subprocess.run(
            [sys.executable, '-m', 'gpu_nova_ext.cmd.cli', 'simulate',
             f.name] + list(args), capture_output=True, text=True,
            timeout=deadline.WAIT_S)
    finally:
        os.unlink(f.name)
    return proc.returncode, proc.stdout, proc.stderr
