# SPDX-License-Identifier: Apache-2.0

"""Stand-in for devstack's ini functions: a tiny ini editor that keeps
repeated options (multi-valued oslo.config options) and section order.

    ini_tool.py get FILE SECTION OPTION
    ini_tool.py getmulti FILE SECTION OPTION
    ini_tool.py set FILE SECTION OPTION VALUE
    ini_tool.py setmulti FILE SECTION OPTION VALUE...
    ini_tool.py delete FILE SECTION OPTION
"""
import os
import sys


def load(path):
    sections = []   # [(name, [(option, value)])]
    if not os.path.exists(path):
        return sections
    current = None
    with open(path) as f:
        for raw in f:
            line = raw.rstrip('\n')
            stripped = line.strip()
            if not stripped or stripped.startswith('#'):
                continue
            if stripped.startswith('[') and stripped.endswith(']'):
                current = (stripped[1:-1], [])
                sections.append(current)
            elif '=' in stripped and current is not None:
                option, _, value = stripped.partition('=')
                current[1].append((option.strip(), value.strip()))
    return sections


def save(path, sections):
    with open(path, 'w') as f:
        for name, pairs in sections:
            f.write('[%s]\n' % name)
            for option, value in pairs:
                f.write('%s = %s\n' % (option, value))
            f.write('\n')


def section(sections, name):
    for sec in sections:
        if sec[0] == name:
            return sec
    sec = (name, [])
    sections.append(sec)
    return sec


def main(argv):
    cmd, path, sec_name, option = argv[:4]
    values = argv[4:]
    sections = load(path)
    if cmd in ('get', 'getmulti'):
        found = [value for name, pairs in sections if name == sec_name
                 for opt, value in pairs if opt == option]
        if found:
            print(found[0] if cmd == 'get' else ' '.join(found))
        return 0
    if cmd == 'delete' and sec_name not in [n for n, _ in sections]:
        return 0
    sec = section(sections, sec_name)
    kept = [(o, v) for o, v in sec[1] if o != option]
    if cmd == 'delete':
        values = []
    elif cmd == 'set':
        values = values[:1]
    sec[1][:] = kept + [(option, v) for v in values]
    save(path, sections)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
