# SPDX-License-Identifier: Apache-2.0

"""Load YAML that someone else wrote: bounded, safe, strict.

One loader for every YAML file the project reads from users (simulator
scenarios, the agent's ``simulated_gpus_file``):

* PyYAML's safe loader, the C one (``CSafeLoader``, libyaml) when PyYAML
  was built with it: only plain data, no Python objects;
* at most ``max_bytes`` of input (read no further);
* the document's node graph is composed first and its size *with every
  alias expanded* counted before anything is constructed, so an alias bomb
  ("billion laughs") fails in milliseconds instead of filling memory;
* a key given twice in one mapping is refused (PyYAML keeps the last one
  silently).

Every problem is a :class:`SafeYamlError`, a ``yaml.YAMLError``, whose
message says where (line, column) and what to fix.
"""
from typing import Any

import yaml

#: Input bigger than this is refused (the biggest scenario we ship is a
#: few KiB; a generated 2,000-host one with ``count:`` stays small).
MAX_BYTES = 8 * 1024 * 1024
#: Nodes of the document with aliases expanded (a 1,000-host scenario
#: written out host by host has about 100,000).
MAX_NODES = 2_000_000

Loader = getattr(yaml, 'CSafeLoader', yaml.SafeLoader)
MERGE_TAG = 'tag:yaml.org,2002:merge'


class SafeYamlError(yaml.YAMLError):
    """Bad, too big or too deep YAML; the message says where and why."""


def _where(node: yaml.Node) -> str:
    mark = node.start_mark
    return 'line %d, column %d' % (mark.line + 1, mark.column + 1)


def _check(root: yaml.Node, max_nodes: int) -> None:
    """Count expanded nodes (memoized per node) and find duplicate keys."""
    sizes: dict[int, int] = {}
    # iterative post-order walk: deep nesting must not hit the recursion
    # limit before the size check does its work
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    on_path: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            total = 1
            for child in _children(node):
                total += sizes[id(child)]
                if total > max_nodes:
                    raise SafeYamlError(
                        'the document expands to more than %d nodes '
                        '(aliases included) near %s; it is refused as an '
                        'alias bomb or simply too big. Write it without '
                        'nested aliases or split it.'
                        % (max_nodes, _where(node)))
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in on_path:
            raise SafeYamlError('recursive alias at %s: a node cannot '
                                'contain itself' % _where(node))
        on_path.add(key)
        stack.append((node, True))
        if isinstance(node, yaml.MappingNode):
            _no_duplicates(node)
        for child in _children(node):
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return node.value
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def _no_duplicates(node: yaml.MappingNode) -> None:
    seen: dict[tuple[str, str], yaml.Node] = {}
    for key_node, _value in node.value:
        if not isinstance(key_node, yaml.ScalarNode):
            continue
        if key_node.tag == MERGE_TAG:
            continue
        key = (key_node.tag, key_node.value)
        if key in seen:
            raise SafeYamlError(
                'key %r at %s is given twice in the same mapping (first at '
                '%s); YAML keeps only one of them. Remove or rename one.'
                % (key_node.value, _where(key_node), _where(seen[key])))
        seen[key] = key_node


def load(stream: Any, max_bytes: int = MAX_BYTES,
         max_nodes: int = MAX_NODES) -> Any:
    """The one document in ``stream`` (a str or a text file) as data.

    :raises SafeYamlError: input over ``max_bytes``, over ``max_nodes``
        nodes with aliases expanded, a duplicate key, or not YAML (the
        parser's own ``yaml.YAMLError`` subclasses are passed through).
    """
    text = stream if isinstance(stream, str) else stream.read(max_bytes + 1)
    if len(text) > max_bytes:
        raise SafeYamlError('the input is larger than %d bytes; it is '
                            'refused. Make it smaller.' % max_bytes)
    loader = Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _check(root, max_nodes)
        return loader.construct_document(root)
    finally:
        loader.dispose()
