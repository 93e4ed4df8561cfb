"""Read ``rollout.yaml`` (the project's operations config) from the repository root."""

from __future__ import annotations

from pathlib import Path

import yaml

from infra.core.errors import ConfigError, ConfigErrors
from infra.io.stackfiles import display_path, project_root
from infra.io.yaml_files import DuplicateKeyError, duplicate_key_fix, load_yaml
from infra.schema.parse import parse_model
from infra.stack.rollout import ROLLOUT_FILE, RolloutConfig


def rollout_file(path: Path | None = None) -> Path:
    return path or project_root() / ROLLOUT_FILE


def load_rollout_config(path: Path | None = None) -> RolloutConfig:
    """Validate ``rollout.yaml``; one-line errors naming the field and the fix."""
    file = rollout_file(path)
    source = display_path(file)
    if not file.is_file():
        raise ConfigErrors(
            [
                ConfigError(
                    source, "not found", "create it (backend_url, secrets_provider); see docs/operations.md"
                )
            ]
        )
    try:
        raw = load_yaml(file.read_text()) or {}
    except DuplicateKeyError as exc:
        raise ConfigErrors([ConfigError(source, str(exc), duplicate_key_fix(exc))]) from None
    except yaml.YAMLError as exc:
        raise ConfigErrors([ConfigError(source, f"not valid YAML: {exc}", "fix the syntax")]) from None
    return parse_model(raw, RolloutConfig, ROLLOUT_FILE)
