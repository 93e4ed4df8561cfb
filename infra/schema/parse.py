"""Turn schema violations of ``aiplat:platform`` into one-line errors with a fix (did-you-mean for keys).

Pure: the value comes in as data. Under ``pulumi up`` the program reads it through ``pulumi.Config``; the
offline ``aiplat plan`` reads the stack file (``infra/io/stackfiles.py``). Both end in
``parse_platform_config``, so the errors are identical.
"""

from __future__ import annotations

import datetime as dt
import difflib
import json
import types
import typing
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from infra.core.errors import ConfigError, ConfigErrors
from infra.core.project import CONFIG_KEY
from infra.schema.platform import PlatformConfig

M = TypeVar("M", bound=BaseModel)


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The pydantic model that owns the last element of ``loc`` (dict keys are skipped)."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(str(part))
            if field is None:
                return None
            current = field.annotation
        elif typing.get_origin(current) is dict:
            current = typing.get_args(current)[1]
        else:
            return None
        # unwrap Optional[...] / Annotated[...]
        while typing.get_origin(current) in (typing.Union, types.UnionType, typing.Annotated):
            args = [a for a in typing.get_args(current) if a is not type(None)]
            current = args[0]
    if typing.get_origin(current) is dict:
        return None
    return current if isinstance(current, type) and issubclass(current, BaseModel) else None


def _format(loc: tuple[Any, ...], prefix: str = CONFIG_KEY) -> str:
    """The dotted field name; with an empty ``prefix`` (a file of its own, named as the errors' source)
    the path from the file's top."""
    return ".".join([*([prefix] if prefix else []), *(str(p) for p in loc)])


def _to_config_errors(
    exc: ValidationError, root: type[BaseModel] = PlatformConfig, prefix: str = CONFIG_KEY
) -> list[ConfigError]:
    errors: list[ConfigError] = []
    raw_errors = exc.errors(include_url=False)
    # A misspelt required key shows up twice (unknown 'regoin', missing 'region'); report it once.
    missing = {tuple(e["loc"]) for e in raw_errors if e["type"] == "missing"}
    explained: set[tuple[Any, ...]] = set()
    for err in raw_errors:
        if err["type"] == "extra_forbidden":
            loc = tuple(err["loc"])
            owner = _model_at(root, loc)
            close = difflib.get_close_matches(str(loc[-1]), sorted(owner.model_fields) if owner else [], n=1)
            if close and (*loc[:-1], close[0]) in missing:
                explained.add((*loc[:-1], close[0]))
    for err in raw_errors:
        if err["type"] == "missing" and tuple(err["loc"]) in explained:
            continue
        loc = tuple(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            owner = _model_at(root, loc)
            known = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else f"remove it; known keys: {', '.join(known)}"
            errors.append(ConfigError(_format(loc, prefix), "unknown key", fix))
        elif kind == "missing":
            where = "the stack file" if prefix == CONFIG_KEY else (prefix.split(":")[0] or "the file")
            errors.append(ConfigError(_format(loc, prefix), "required key is missing", f"add it to {where}"))
        elif kind in ("value_error", "assertion_error"):
            # our validators phrase "<problem>; <fix>"
            msg = str(err["ctx"].get("error", err["msg"])) if err.get("ctx") else err["msg"]
            msg = msg.removeprefix("Value error, ")
            problem, _, fix = msg.partition("; ")
            errors.append(ConfigError(_format(loc, prefix) if loc else prefix, problem, fix or None))
        elif kind == "enum":
            expected = err.get("ctx", {}).get("expected", "")
            errors.append(
                ConfigError(
                    _format(loc, prefix), f"{err['input']!r} is not allowed", f"use one of {expected}"
                )
            )
        elif kind in _QUOTED and isinstance(err["input"], str):
            errors.append(_quoted(_format(loc, prefix), err["input"], kind))
        elif kind == "string_type" and type(err["input"]) in (int, float):
            errors.append(_unquoted(_format(loc, prefix), err["input"]))
        elif kind in _BOUNDS:
            errors.append(_out_of_bounds(root, loc, _format(loc, prefix), err))
        else:
            # only the first letter is lowered: the message may quote a pattern (\S and \s differ)
            msg = err["msg"][:1].lower() + err["msg"][1:]
            errors.append(ConfigError(_format(loc, prefix), f"{err['input']!r}: {msg}", "correct the value"))
    return errors


# Strict types a YAML string reaches when a number or a boolean was quoted: what each one wants, and
# whether the unquoted text is such a value.
_QUOTED: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "int_type": ("an integer", lambda v: type(v) is int),
    "float_type": ("a number", lambda v: type(v) in (int, float)),
    "bool_type": ("true or false", lambda v: type(v) is bool),
}


def _quoted(field: str, value: str, kind: str) -> ConfigError:
    """A quoted number or boolean (``"3"``): refused, with the value to write instead when it is one."""
    wanted, fits = _QUOTED[kind]
    try:
        unquoted = json.loads(value)
    except ValueError:
        unquoted = None
    key = field.rsplit(".", 1)[-1]
    fix = (
        f"write it without quotes ({key}: {json.dumps(unquoted)})"
        if fits(unquoted)
        else f"write {wanted} without quotes"
    )
    return ConfigError(field, f"{value!r} is a string, but {wanted} is expected", fix)


# Text fields whose values YAML reads as numbers when unquoted, and how the number was most likely written:
# a Kubernetes minor has two digits after the point (1.30 unquoted is the float 1.3).
_AS_WRITTEN: dict[str, Callable[[Any], str]] = {"kubernetes_version": lambda v: f"{v:.2f}"}


def _unquoted(field: str, value: int | float) -> ConfigError:
    """A number where text is expected: YAML read an unquoted ``1.30`` as the number 1.3."""
    key = field.rsplit(".", 1)[-1]
    written = _AS_WRITTEN.get(key, json.dumps)(value) if type(value) is float else json.dumps(value)
    read = (
        "" if written == json.dumps(value) else f" (YAML reads an unquoted {written} as the number {value})"
    )
    return ConfigError(
        field,
        f"{value!r} is a number{read}, but text is expected",
        f'quote it: {key}: "{written}"',
    )


# Numeric bounds pydantic reports: the bound's name in the error's ctx, and how to say it.
_BOUNDS = {
    "greater_than_equal": ("ge", "at least {}"),
    "greater_than": ("gt", "more than {}"),
    "less_than_equal": ("le", "at most {}"),
    "less_than": ("lt", "less than {}"),
}


def _out_of_bounds(root: type[BaseModel], loc: tuple[Any, ...], field: str, err: Any) -> ConfigError:
    """A number out of its field's range: the fix says the range and the field's own reason for it (its
    description in the schema)."""
    bound_key, phrase = _BOUNDS[err["type"]]
    bound = err.get("ctx", {}).get(bound_key)
    msg = err["msg"][:1].lower() + err["msg"][1:]
    owner = _model_at(root, loc)
    info = owner.model_fields.get(str(loc[-1])) if owner and loc else None
    why = f" ({info.description})" if info is not None and info.description else ""
    key = str(loc[-1]) if loc else field
    return ConfigError(field, f"{err['input']!r}: {msg}", f"set {key} to {phrase.format(bound)}{why}")


def _as_json(raw: Any) -> str:
    """``raw`` as JSON text, which pydantic's strict JSON mode validates: a quoted number stays a string
    (refused where an integer is asked for) while strings still name enums. YAML dates become ISO text."""

    def other(value: Any) -> Any:
        if isinstance(value, dt.date):
            return value.isoformat()
        raise TypeError(f"{value!r} ({type(value).__name__})")

    return json.dumps(raw, default=other)


def _validate(model: type[M], raw: Any, prefix: str) -> M:
    """``raw`` validated strictly (pydantic strict mode on its JSON text): no string-to-number coercion.
    https://docs.pydantic.dev/latest/concepts/strict_mode/"""
    try:
        text = _as_json(raw)
    except (TypeError, ValueError) as exc:
        raise ConfigErrors(
            [
                ConfigError(
                    prefix,
                    f"holds a value that is not text, a number, a list or a mapping: {exc}",
                    "quote it as a string",
                )
            ]
        ) from None
    try:
        return model.model_validate_json(text, strict=True)
    except ValidationError as exc:
        raise ConfigErrors(_to_config_errors(exc, model, prefix)) from None


def parse_platform_config(raw: Any) -> PlatformConfig:
    """Validate the value of ``aiplat:platform``; raise ConfigErrors naming every bad field."""
    if not isinstance(raw, dict):
        raise ConfigErrors(
            [ConfigError(CONFIG_KEY, "must be a mapping", "see docs/reference/config.md for the schema")]
        )
    return _validate(PlatformConfig, raw, CONFIG_KEY)


def parse_model(raw: Any, model: type[M], prefix: str) -> M:
    """Validate ``raw`` against another strict model of the project (e.g. ``rollout.yaml``), with the same
    one-line errors; ``prefix`` names the file or key the fields live under."""
    if not isinstance(raw, dict):
        raise ConfigErrors([ConfigError(prefix, "must be a mapping", "see docs/operations.md")])
    return _validate(model, raw, prefix)
