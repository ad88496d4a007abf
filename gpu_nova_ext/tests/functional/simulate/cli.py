# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

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
