"""YAML as the user wrote it: a mapping that names one key twice is refused, not silently reduced to its
last copy (PyYAML's ``safe_load`` keeps the last one; YAML 1.2 says keys of a mapping are unique,
https://yaml.org/spec/1.2.2/#mapping).

Used for every file a person edits: stack files, job files, ``rollout.yaml``; ``set_scalar`` changes one
value of such a file and nothing else (``aiplat release promote``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode, ScalarNode


class DuplicateKeyError(yaml.YAMLError):
    """A mapping names ``key`` twice: at ``first_line`` and again at ``line`` (1-based)."""

    def __init__(self, key: Any, first_line: int, line: int, parent: str | None):
        self.key, self.first_line, self.line, self.parent = key, first_line, line, parent
        under = f" under {parent!r}" if parent else ""
        super().__init__(f"key {key!r}{under} appears twice: at line {first_line} and at line {line}")


class _UniqueKeyLoader(yaml.SafeLoader):
    """``SafeLoader`` that refuses a key repeated in one mapping (merge keys ``<<`` aside)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                hash(key)
            except TypeError:
                raise ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    "found an unhashable key",
                    key_node.start_mark,
                ) from None
            line = key_node.start_mark.line + 1
            if key in seen:
                raise DuplicateKeyError(key, seen[key], line, self._parents.get(id(node)))
            seen[key] = line
            if isinstance(value_node, MappingNode):  # its duplicates name this key as their parent
                self._parents[id(value_node)] = str(key)
        return super().construct_mapping(node, deep=deep)

    def __init__(self, stream: Any):
        super().__init__(stream)
        self._parents: dict[int, str] = {}


def load_yaml(text: str | bytes) -> Any:
    """The document in ``text``, as ``yaml.safe_load`` reads it; raises ``DuplicateKeyError`` (a
    ``yaml.YAMLError``) when a mapping repeats a key."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def duplicate_key_fix(exc: DuplicateKeyError) -> str:
    """What to do about it: YAML would otherwise drop the first copy without a word."""
    return (
        f"keep one {exc.key!r} (merge the two: a YAML loader keeps only the last copy, so everything under "
        f"line {exc.first_line} would be ignored)"
    )


def set_scalar(text: str, keys: Sequence[str], value: str) -> str:
    """``text`` with the scalar at the mapping keys ``keys`` replaced by ``value`` and every other character
    as it was (comments, order, blank lines, the quoting of the rest): the scalar's place is the span of its
    node as PyYAML composes the file (``start_mark``/``end_mark``), its quote style is kept. ``KeyError``
    names the first key of ``keys`` that is not there; ``ValueError`` says the path ends at no scalar."""
    node = yaml.compose(text, Loader=yaml.SafeLoader)
    for depth, key in enumerate(keys):
        found = None
        if isinstance(node, MappingNode):
            found = next((v for k, v in node.value if isinstance(k, ScalarNode) and k.value == key), None)
        if found is None:
            raise KeyError(".".join(keys[: depth + 1]))
        node = found
    if not isinstance(node, ScalarNode) or node.style in ("|", ">"):
        raise ValueError(f"{'.'.join(keys)} is not a one-line scalar")
    quote = node.style if node.style in ("'", '"') else ""
    plain = (
        yaml.safe_load(value) == value and value.strip() == value and "#" not in value and ": " not in value
    )
    if not quote and not plain:
        quote = '"'
    new = f"{quote}{value}{quote}" if quote != '"' else json.dumps(value)
    start, end = node.start_mark.index, node.end_mark.index
    return text[:start] + new + text[end:]
