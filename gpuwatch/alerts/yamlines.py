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


class _Loader(yaml.SafeLoader):
    def compose_node(self, parent: Any, index: Any) -> Any:
        """Aliases (``*name``) are refused: a few of them nest into billions of nodes (a "billion laughs"
        file of 1 KiB costs gigabytes), and rule files do not need them."""
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in rule files; "
                                              "write the value out", event.start_mark)
        return super().compose_node(parent, index)


def _mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
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


def _sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line, out.item_lines = node.start_mark.line + 1, [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _sequence)


def load_yaml(text: str) -> Any:
    """Parse ``text``; yaml.YAMLError (with its own line and column) on a syntax error."""
    return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects


def line_of(obj: Any, key: Any = None, default: int = 1) -> int:
    """Line of ``key`` in a LineDict (or of the object itself), ``default`` where unknown."""
    if isinstance(obj, LineDict):
        return obj.key_lines.get(key, obj.line) if key is not None else obj.line
    if isinstance(obj, LineList):
        if isinstance(key, int) and 0 <= key < len(obj.item_lines):
            return obj.item_lines[key]
        return obj.line
    return default
