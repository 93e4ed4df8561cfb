"""Load a stack file and turn schema violations into one-line errors with a fix.

The same parsing runs in two places: under ``pulumi up`` the program reads ``aiplat:platform`` through
``pulumi.Config``; the offline ``aiplat plan`` reads the stack file itself. Both end in
``parse_platform_config`` so the errors are identical.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from infra.config.schema import PlatformConfig
from infra.errors import ConfigError, ConfigErrors

NAMESPACE = "aiplat"
CONFIG_KEY = f"{NAMESPACE}:platform"
# Keys a stack file may hold besides ours. The AWS provider is configured explicitly from
# aiplat:platform.region, so 'aws:region' is refused to keep one source of truth.
ALLOWED_FOREIGN_KEYS = {"pulumi:disable-default-providers", "pulumi:tags"}

STACKS_DIR = Path(__file__).resolve().parents[2] / "stacks"


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    return (stacks_dir or STACKS_DIR) / f"Pulumi.{stack}.yaml"


def list_stacks(stacks_dir: Path | None = None) -> list[str]:
    folder = stacks_dir or STACKS_DIR
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in folder.glob("Pulumi.*.yaml"))


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


def _format(loc: tuple[Any, ...]) -> str:
    return ".".join([CONFIG_KEY, *(str(p) for p in loc)])


def _to_config_errors(exc: ValidationError) -> list[ConfigError]:
    errors: list[ConfigError] = []
    raw_errors = exc.errors(include_url=False)
    # A misspelt required key shows up twice (unknown 'regoin', missing 'region'); report it once.
    missing = {tuple(e["loc"]) for e in raw_errors if e["type"] == "missing"}
    explained: set[tuple[Any, ...]] = set()
    for err in raw_errors:
        if err["type"] == "extra_forbidden":
            loc = tuple(err["loc"])
            owner = _model_at(PlatformConfig, loc)
            close = difflib.get_close_matches(str(loc[-1]), sorted(owner.model_fields) if owner else [], n=1)
            if close and (*loc[:-1], close[0]) in missing:
                explained.add((*loc[:-1], close[0]))
    for err in raw_errors:
        if err["type"] == "missing" and tuple(err["loc"]) in explained:
            continue
        loc = tuple(err["loc"])
        kind = err["type"]
        if kind == "extra_forbidden":
            owner = _model_at(PlatformConfig, loc)
            known = sorted(owner.model_fields) if owner else []
            close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6)
            fix = f"did you mean '{close[0]}'?" if close else f"remove it; known keys: {', '.join(known)}"
            errors.append(ConfigError(_format(loc), "unknown key", fix))
        elif kind == "missing":
            errors.append(ConfigError(_format(loc), "required key is missing", "add it to the stack file"))
        elif kind in ("value_error", "assertion_error"):
            # our validators phrase "<problem>; <fix>"
            msg = str(err["ctx"].get("error", err["msg"])) if err.get("ctx") else err["msg"]
            msg = msg.removeprefix("Value error, ")
            problem, _, fix = msg.partition("; ")
            errors.append(ConfigError(_format(loc) if loc else CONFIG_KEY, problem, fix or None))
        elif kind == "enum":
            expected = err.get("ctx", {}).get("expected", "")
            errors.append(
                ConfigError(_format(loc), f"{err['input']!r} is not allowed", f"use one of {expected}")
            )
        else:
            errors.append(
                ConfigError(_format(loc), f"{err['input']!r}: {err['msg'].lower()}", "correct the value")
            )
    return errors


def parse_platform_config(raw: Any) -> PlatformConfig:
    """Validate the value of ``aiplat:platform``; raise ConfigErrors naming every bad field."""
    if not isinstance(raw, dict):
        raise ConfigErrors(
            [ConfigError(CONFIG_KEY, "must be a mapping", "see stacks/README.md for the schema")]
        )
    try:
        return PlatformConfig.model_validate(raw)
    except ValidationError as exc:
        raise ConfigErrors(_to_config_errors(exc)) from None


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> PlatformConfig:
    """Read ``stacks/Pulumi.<stack>.yaml`` and validate it."""
    path = stack_file(stack, stacks_dir)
    source = str(path.relative_to(path.parents[1])) if stacks_dir is None else str(path)
    if not path.exists():
        known = list_stacks(stacks_dir)
        close = difflib.get_close_matches(stack, known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(known)}"
        raise ConfigErrors([ConfigError("--stack", f"no stack file {source}", fix)])
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigErrors(
            [ConfigError("(file)", f"not valid YAML: {exc}", "fix the syntax", source=source)]
        ) from None
    config = doc.get("config") if isinstance(doc, dict) else None
    if not isinstance(config, dict):
        raise ConfigErrors(
            [ConfigError("config", "missing mapping", f"add 'config: {{{CONFIG_KEY}: ...}}'", source=source)]
        )
    errors: list[ConfigError] = []
    for key in config:
        if key == CONFIG_KEY or key in ALLOWED_FOREIGN_KEYS:
            continue
        if key == "aws:region":
            errors.append(
                ConfigError(
                    key, "set here", f"set {CONFIG_KEY}.region instead (one source of truth)", source=source
                )
            )
            continue
        close = difflib.get_close_matches(key, [CONFIG_KEY, *ALLOWED_FOREIGN_KEYS], n=1, cutoff=0.6)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; this project reads only {CONFIG_KEY}"
        errors.append(ConfigError(key, "unknown config key", fix, source=source))
    if CONFIG_KEY not in config:
        errors.append(
            ConfigError(CONFIG_KEY, "required key is missing", "add it to the stack file", source=source)
        )
    if errors:
        raise ConfigErrors(errors)
    try:
        return parse_platform_config(config[CONFIG_KEY])
    except ConfigErrors as exc:
        raise ConfigErrors([e.with_source(source) for e in exc.errors]) from None
