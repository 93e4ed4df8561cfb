"""Read a job file (``aiplat train render/submit -f job.yaml``): YAML, validated against the job schema
(``infra/jobs/config.py``) with the stack config's one-line errors, each naming the file."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import ConfigError, ConfigErrors
from infra.io.stackfiles import display_path
from infra.io.yaml_files import DuplicateKeyError, duplicate_key_fix, load_yaml
from infra.jobs.config import JobSpec
from infra.schema.parse import parse_model

SCHEMA_DOC = "docs/reference/job-file.md"


@dataclass(frozen=True)
class JobFile:
    """A validated job file: the job, where it was read and its bytes (their sha256 goes on the TrainJob)."""

    spec: JobSpec
    source: str
    data: bytes


def apply_overrides(raw: dict[str, Any], overrides: list[tuple[str, str]]) -> dict[str, Any]:
    """``raw`` with each ``field.path=value`` set (a sweep's ``--set``); values are YAML (``3``, ``true``,
    ``[a, b]``) except under ``env``, whose values stay strings."""
    out = copy.deepcopy(raw)
    for key, value in overrides:
        parts = key.split(".")
        if not key or not all(parts):
            raise ConfigErrors(
                [ConfigError("--set", f"{key}={value}", "use --set field=value, e.g. nodes=2")]
            )
        node = out
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigErrors(
                    [ConfigError("--set", f"{key}: {part} is not a mapping in the job file", "set a field")]
                )
            node = child
        node[parts[-1]] = value if parts[0] == "env" else yaml.safe_load(value)
    return out


def load_job_file(path: Path, overrides: list[tuple[str, str]] | None = None) -> JobFile:
    """The job in ``path`` with ``overrides`` applied (``apply_overrides``); ``ConfigErrors`` naming the
    file (and the overrides) and each bad field otherwise."""
    source = display_path(path)
    if not path.is_file():
        raise ConfigErrors([ConfigError("-f", f"{source}: no such file", "give the path of your job file")])
    data = path.read_bytes()
    try:
        raw = load_yaml(data)
    except DuplicateKeyError as exc:
        raise ConfigErrors([ConfigError(source, str(exc), duplicate_key_fix(exc))]) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([ConfigError(source, f"not valid YAML: {exc}", "fix the syntax")]) from None
    if not isinstance(raw, dict):
        raise ConfigErrors(
            [ConfigError(source, "must be a mapping of the job's fields", f"see {SCHEMA_DOC} for the schema")]
        )
    if overrides:
        raw = apply_overrides(raw, overrides)
        source += " with " + " ".join(f"{k}={v}" for k, v in overrides)
    try:
        spec = parse_model(raw, JobSpec, "")
    except ConfigErrors as exc:
        raise exc.with_source(source) from None
    return JobFile(spec=spec, source=source, data=data)
