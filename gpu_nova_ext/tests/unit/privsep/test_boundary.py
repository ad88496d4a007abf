# SPDX-License-Identifier: Apache-2.0

"""Only the privileged entry points change a GPU (read from the source).

Every NVML function named with a changing verb (derived from the
installed pynvml, so a setter NVML adds later is covered), and every file
opened for writing in the agent and the inventory, may appear only in
gpu_nova_ext/privsep/.  The tests and the fakes are not production code
and are not read.
"""
import ast
import os
import re

from oslotest import base
import pynvml

import gpu_nova_ext
from gpu_nova_ext import privsep

PACKAGE = os.path.dirname(gpu_nova_ext.__file__)
PRIVSEP = os.path.dirname(privsep.__file__)
TESTS = os.path.join(PACKAGE, 'tests')
#: NVML's changing verbs; event sets (the caller's own objects) and
#: getters are reads
SETTER = re.compile(r'^nvml(?!\w*(?:EventSet|Get))[A-Z]\w*?'
                    r'(?:Set|Create|Destroy|Reset|Clear|Modify|Remove)'
                    r'(?=[A-Z0-9_]|$)')
#: where nothing is written but through privsep
#: (design doc: Privileged work)
NO_WRITES = ('agent', 'inventory')
WRITE_MODES = set('wax+')


def nvml_setters() -> frozenset:
    return frozenset(name for name in dir(pynvml)
                     if SETTER.match(name) and callable(getattr(pynvml,
                                                                name)))


def sources():
    for top, dirs, files in os.walk(PACKAGE):
        if top.startswith(TESTS):
            continue
        for name in sorted(files):
            if name.endswith('.py'):
                path = os.path.join(top, name)
                with open(path, encoding='utf-8') as f:
                    yield path, ast.parse(f.read(), path)


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    if isinstance(func, ast.Name):
        return func.id
    return None


def nvml_setter_uses(tree, setters) -> list[tuple[int, str]]:
    """(line, name) of each call of, or string naming, an NVML setter."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _called_name(node) in setters:
            found.append((node.lineno, _called_name(node)))
        elif (isinstance(node, ast.Constant) and node.value in setters and
              isinstance(node.value, str)):
            found.append((node.lineno, node.value))    # getattr(nvml, ...)
    return found


def _mode(call: ast.Call) -> str | None:
    """The literal mode of an open() call; '?' when not a literal."""
    arg = (call.args[1] if len(call.args) > 1 else
           next((k.value for k in call.keywords if k.arg == 'mode'), None))
    if arg is None:
        return None
    return arg.value if isinstance(arg, ast.Constant) else '?'


def file_writes(tree) -> list[tuple[int, str]]:
    """(line, what) of each file opened or written for writing."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        if name in ('open', 'fdopen'):
            mode = _mode(node)
            if mode and (mode == '?' or WRITE_MODES & set(mode)):
                found.append((node.lineno, 'open(..., %r)' % mode))
        elif name in ('write_text', 'write_bytes'):
            found.append((node.lineno, name))
    return found


class TestBoundary(base.BaseTestCase):

    def test_the_setter_rule_knows_the_setters_the_agent_needs(self):
        setters = nvml_setters()
        for name in ('nvmlDeviceSetMigMode', 'nvmlGpuInstanceDestroy',
                     'nvmlDeviceCreateGpuInstanceWithPlacement',
                     'nvmlDeviceSetPowerManagementLimit',
                     'nvmlGpuInstanceCreateComputeInstance',
                     'nvmlComputeInstanceDestroy'):
            self.assertIn(name, setters)
        for name in ('nvmlDeviceGetMigMode', 'nvmlEventSetCreate',
                     'nvmlDeviceRegisterEvents',
                     'nvmlDeviceGetCreatableVgpus', 'nvmlInit'):
            self.assertNotIn(name, setters)

    def test_nvml_setters_only_in_privsep(self):
        setters = nvml_setters()
        outside, inside = [], []
        for path, tree in sources():
            uses = nvml_setter_uses(tree, setters)
            if path.startswith(PRIVSEP + os.sep):
                inside += uses
            else:
                outside += ['%s:%d %s' % (os.path.relpath(path, PACKAGE),
                                          line, name)
                            for line, name in uses]
        self.assertEqual([], outside, 'call these through an entry point '
                                      'of gpu_nova_ext.privsep.gpu')
        # the rule reads what it means to: the entry points are found
        self.assertEqual({'nvmlDeviceSetMigMode', 'nvmlGpuInstanceDestroy',
                          'nvmlDeviceCreateGpuInstanceWithPlacement',
                          'nvmlDeviceSetPowerManagementLimit'},
                         {name for _line, name in inside})

    def test_agent_and_inventory_write_no_file(self):
        outside, inside = [], []
        for path, tree in sources():
            relative = os.path.relpath(path, PACKAGE)
            if path.startswith(PRIVSEP + os.sep):
                inside += file_writes(tree)
            elif relative.split(os.sep)[0] in NO_WRITES:
                outside += ['%s:%d %s' % (relative, line, what)
                            for line, what in file_writes(tree)]
        self.assertEqual([], outside, 'sysfs writes go through '
                                      'gpu_nova_ext.privsep.gpu')
        self.assertEqual(1, len(inside))    # the hwmon power cap

    def test_every_entry_point_is_in_privsep_and_of_the_context(self):
        from gpu_nova_ext.privsep import gpu
        entry_points = [name for name in dir(gpu) if
                        privsep.sys_admin_pctxt.is_entrypoint(
                            getattr(gpu, name))]
        self.assertEqual(['create_gpu_instance', 'destroy_gpu_instance',
                          'set_hwmon_power_cap', 'set_mig_mode',
                          'set_power_limit'], entry_points)

        def elsewhere():
            pass
        elsewhere.__module__ = 'gpu_nova_ext.agent.power_policy'
        self.assertRaises(AssertionError, privsep.sys_admin_pctxt.entrypoint,
                          elsewhere)
