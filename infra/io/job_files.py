"""Read a job file (``aiplat train render/submit -f job.yaml``): YAML, validated against the job schema
(``infra/jobs/config.py``) with the stack config's one-line errors, each naming the file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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


def load_job_file(path: Path) -> JobFile:
    """The job in ``path``; ``ConfigErrors`` naming the file and each bad field otherwise."""
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
    try:
        spec = parse_model(raw, JobSpec, "")
    except ConfigErrors as exc:
        raise exc.with_source(source) from None
    return JobFile(spec=spec, source=source, data=data)
