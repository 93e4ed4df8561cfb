"""The config reference (``docs/reference/config.md``), generated from the schema's fields and docstrings.

Pure: returns Markdown. ``aiplat docs --write`` writes it with the site's other generated pages and
``make test`` fails when the file is not what the schema generates (a field added without regenerating).
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from typing import Any

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from infra.core.project import CONFIG_KEY
from infra.schema.platform import PlatformConfig

HEADER = f"""# Stack config reference

Generated from the schema (`infra/schema/`) by `aiplat docs --write`; `make test` fails when this
page is stale. Every stack file holds one key, `{CONFIG_KEY}`. Unknown keys are
refused with a did-you-mean hint; maps keyed by name (`node_pools.<name>`) keep resource names stable.
Checks that need AWS facts (is the type offered in the zone? how many EFA interfaces does it take?) run as
rules before any resource is declared (`infra/rules.py`).
"""


def _unwrap(annotation: Any) -> tuple[Any, list[Any], bool]:
    """(inner type, constraint metadata, optional?) of an annotation."""
    meta: list[Any] = []
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            args = typing.get_args(annotation)
            annotation = args[0]
            for m in args[1:]:
                meta.extend(m.metadata if isinstance(m, FieldInfo) else [m])
        elif origin in (typing.Union, types.UnionType):
            args = [a for a in typing.get_args(annotation) if a is not type(None)]
            optional = optional or len(args) < len(typing.get_args(annotation))
            annotation = args[0]
        else:
            return annotation, meta, optional


def _type_name(annotation: Any) -> str:
    inner, _, _ = _unwrap(annotation)
    origin = typing.get_origin(inner)
    if origin is list:
        return f"list of {_type_name(typing.get_args(inner)[0])}"
    if origin is dict:
        key, value = typing.get_args(inner)
        return f"map of {_type_name(key)} to {_type_name(value)}"
    if isinstance(inner, type) and issubclass(inner, enum.Enum):
        return " \\| ".join(f"`{m.value}`" for m in inner)
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return "section"
    return getattr(inner, "__name__", str(inner))


def _constraints(field: FieldInfo) -> str:
    _, meta, _ = _unwrap(field.annotation)
    meta = [*meta, *field.metadata]
    parts = []
    for m in meta:
        if isinstance(m, Ge):
            parts.append(f">= {m.ge}")
        elif isinstance(m, Gt):
            parts.append(f"> {m.gt}")
        elif isinstance(m, Le):
            parts.append(f"<= {m.le}")
        elif isinstance(m, Lt):
            parts.append(f"< {m.lt}")
        elif isinstance(m, MinLen):
            parts.append(f"length >= {m.min_length}")
        elif isinstance(m, MaxLen):
            parts.append(f"length <= {m.max_length}")
        elif getattr(m, "pattern", None):
            # a '|' ends a table cell even inside a code span (GitHub Flavored Markdown tables)
            parts.append(f"pattern `{m.pattern}`".replace("|", "\\|"))
    return ", ".join(parts)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "**required**"
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
        if isinstance(value, BaseModel):
            return "(section defaults)"
    else:
        value = field.default
    if value is None or value is PydanticUndefined:
        return "none"
    if isinstance(value, enum.Enum):
        value = value.value
    if value in ({}, []):
        return "empty"
    if isinstance(value, list | tuple):
        return ", ".join(f"`{v}`" for v in value)
    return f"`{value}`"


def _doc(obj: Any) -> str:
    return " ".join((inspect.getdoc(obj) or "").split())


def _section_model(field: FieldInfo) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds directly or as map values, and the path suffix (``.<name>`` for maps)."""
    inner, _, _ = _unwrap(field.annotation)
    if typing.get_origin(inner) is dict:
        value = _unwrap(typing.get_args(inner)[1])[0]
        if isinstance(value, type) and issubclass(value, BaseModel):
            return value, ".<name>"
        return None, ""
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return inner, ""
    return None, ""


def _table(
    model: type[BaseModel],
    path: str,
    out: list[str],
    nested: list[tuple[str, type[BaseModel]]],
    title: str | None = None,
) -> None:
    out += [
        f"## {title or f'`{path}`'}",
        "",
        _doc(model),
        "",
        "| key | type | default | constraints | meaning |",
        "|---|---|---|---|---|",
    ]
    for name, field in model.model_fields.items():
        sub, suffix = _section_model(field)
        child = f"{path}.{name}{suffix}" if path else f"{name}{suffix}"
        meaning = " ".join((field.description or "").split())
        if sub is not None:
            nested.append((child, sub))
            meaning = (meaning + f" See [`{child}`](#{_anchor(child)}).").strip()
        cells = (f"`{name}`", _type_name(field.annotation), _default(field), _constraints(field), meaning)
        out.append("| " + " | ".join(cells) + " |")
    out.append("")


def _anchor(path: str) -> str:
    return "".join(c for c in path.lower() if c.isalnum() or c in "-_ ").replace(" ", "-")


def model_reference(header: str, model: type[BaseModel], root: str, title: str | None = None) -> str:
    """A schema's reference as Markdown: ``header``, then one table per section, in schema order; ``root``
    is the path of the top section (empty: a file of its own, keys from its top, its table ``title``)."""
    out = [header]
    queue: list[tuple[str, type[BaseModel]]] = [(root, model)]
    seen: set[str] = set()
    while queue:
        path, section = queue.pop(0)
        if path in seen:
            continue
        seen.add(path)
        nested: list[tuple[str, type[BaseModel]]] = []
        _table(section, path, out, nested, title if path == root else None)
        queue = nested + queue
    return "\n".join(out).rstrip() + "\n"


def config_reference() -> str:
    """The whole reference as Markdown, one table per section, in schema order."""
    return model_reference(HEADER, PlatformConfig, CONFIG_KEY)
