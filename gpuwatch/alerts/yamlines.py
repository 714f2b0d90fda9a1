"""YAML that remembers where things are: mappings and lists loaded with the line of every key and item,
so a rule error can say ``default.yml:42`` instead of "somewhere in the file"."""

from __future__ import annotations

from typing import Any

import yaml


class LineDict(dict[Any, Any]):
    """A mapping with ``line`` (where it starts), ``key_lines`` and keys seen twice (``duplicates``)."""

    line: int
    key_lines: dict[Any, int]
    duplicates: list[tuple[Any, int]]


class LineList(list[Any]):
    line: int
    item_lines: list[int]


class _RefusesAliases:
    """A SafeLoader (no arbitrary objects) that refuses aliases (``*name``): a few of them nest into billions
    of nodes (a "billion laughs" file of 1 KiB costs gigabytes), and rule files do not need them."""

    def __init__(self, text: str) -> None:
        super().__init__(text)  # type: ignore[call-arg]
        self.text = text

    def get_single_data(self) -> Any:
        node = self.get_single_node()  # type: ignore[attr-defined]
        if node is None:
            return None
        if _shares_a_node(node):
            loader: Any = type(self)  # the shared node knows only where its anchor is: the alias's own place
            mark: Any = next(e.start_mark for e in yaml.parse(self.text, Loader=loader)
                             if isinstance(e, yaml.AliasEvent))
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in rule files; "
                                              "write the value out", mark)
        return self.construct_document(node)  # type: ignore[attr-defined]


class PythonLoader(_RefusesAliases, yaml.SafeLoader):
    """PyYAML's own parser, where it was built without libyaml."""


#: The loaders, fastest first: libyaml's parser where PyYAML has it (the pure-Python one took 10 s to read
#: 3 000 rules, which a daemon's reload waited for).
LOADERS: tuple[type, ...] = (PythonLoader,)
if hasattr(yaml, "CSafeLoader"):
    class LibyamlLoader(_RefusesAliases, yaml.CSafeLoader):
        """libyaml's parser and composer, the same constructors."""

    LOADERS = (LibyamlLoader, PythonLoader)


def _shares_a_node(root: yaml.Node) -> bool:
    """An alias is a node reached twice (the composer shares the anchored node): found at the first repeat,
    before anything walks the graph it makes."""
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            return True
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
    return False


def _mapping(loader: Any, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line, out.key_lines, out.duplicates = node.start_mark.line + 1, {}, []
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            key = str(key)
        line = key_node.start_mark.line + 1
        if key in out:
            out.duplicates.append((key, line))
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = line
    return out


def _sequence(loader: Any, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line, out.item_lines = node.start_mark.line + 1, [child.start_mark.line + 1 for child in node.value]
    return out


for _loader in LOADERS:
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)  # type: ignore[attr-defined]
    _loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)  # type: ignore[attr-defined]


def load_yaml(text: str, loader: type = LOADERS[0]) -> Any:
    """Parse ``text``; yaml.YAMLError (with its own line and column) on a syntax error."""
    return yaml.load(text, Loader=loader)  # a SafeLoader subclass: no arbitrary objects


def line_of(obj: Any, key: Any = None, default: int = 1) -> int:
    """Line of ``key`` in a LineDict (or of the object itself), ``default`` where unknown."""
    if isinstance(obj, LineDict):
        return obj.key_lines.get(key, obj.line) if key is not None else obj.line
    if isinstance(obj, LineList):
        if isinstance(key, int) and 0 <= key < len(obj.item_lines):
            return obj.item_lines[key]
        return obj.line
    return default
