"""``aiplat release promote / rollback``: which infer stacks serve a model, the one key of each stack file
that names its release version, that key changed and nothing else, and the version a rollback returns to.

Where a model's version lives in a stack file is the serving config's contract
(``infra/inference/config.py``):
``inference.models.<served>.release.version`` for a base model and
``inference.models.<base>.adapters.<adapter>.release.version`` for a LoRA adapter, each matched by its
release name (``release.name``, else the key) or its served name. ``served_releases`` is the one place that
knows it. The files are read and changed as text (``infra/io/yaml_files.py`` ``set_scalar``): the
reviewed change is one line per stack file, comments and layout untouched.

A rollback returns to the version the stack file named before the current one, from the file's git history:
that is what was reviewed, rolled out and served in that region, which the release history in the bucket
cannot say (every published version is there, also those never promoted or rolled back for a reason).
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import ConfigError, ConfigErrors
from infra.core.project import CONFIG_KEY
from infra.io.stackfiles import list_stacks, stack_file
from infra.io.yaml_files import load_yaml, set_scalar

FILE_ROOT = ("config", CONFIG_KEY)  # where the platform section sits in a stack file


@dataclass(frozen=True)
class Served:
    """One model an infer stack serves: its served name, its release name and where its version is."""

    served: str
    release: str
    keys: tuple[str, ...]  # from the platform section down to the version
    adapter_of: str | None = None  # the base model's served name, for an adapter


def _release_name(entry: Mapping[str, Any], default: str) -> str:
    release = entry.get("release") if isinstance(entry.get("release"), dict) else {}
    return str(release.get("name") or default)


def served_releases(section: Mapping[str, Any]) -> list[Served]:
    """Every base model and adapter of a stack file's platform section (``inference.models``) with the key
    path of its release version."""
    inference = section.get("inference") if isinstance(section.get("inference"), dict) else {}
    models = inference.get("models") if isinstance(inference.get("models"), dict) else {}
    out: list[Served] = []
    for served, entry in models.items():
        if not isinstance(entry, dict):
            continue
        base = ("inference", "models", str(served))
        out.append(Served(str(served), _release_name(entry, str(served)), (*base, "release", "version")))
        adapters = entry.get("adapters") if isinstance(entry.get("adapters"), dict) else {}
        for name, adapter in adapters.items():
            keys = (*base, "adapters", str(name), "release", "version")
            release = _release_name(adapter if isinstance(adapter, dict) else {}, str(name))
            out.append(Served(str(name), release, keys, adapter_of=str(served)))
    return out


def version_at(section: Mapping[str, Any], keys: Sequence[str]) -> str | None:
    node: Any = section
    for key in keys:
        node = node.get(key) if isinstance(node, dict) else None
    return None if node is None else str(node)


@dataclass(frozen=True)
class Target:
    """One stack file to change: the model as it serves there, and its version now."""

    stack: str
    path: Path
    served: Served
    current: str | None


def _section(text: str) -> dict[str, Any]:
    doc = load_yaml(text) or {}
    node: Any = doc
    for key in FILE_ROOT:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else {}


def serving_stacks(model: str, env: str, stacks_dir: Path | None = None) -> list[Target]:
    """The infer stacks of ``env`` that serve ``model`` (a release name or a served name, base or
    adapter), in the order of their names; ConfigErrors when none does (naming what the env serves)."""
    targets: list[Target] = []
    offered: set[str] = set()
    for stack in list_stacks(stacks_dir):
        path = stack_file(stack, stacks_dir)
        try:
            section = _section(path.read_text())
        except (OSError, yaml.YAMLError):
            continue  # a broken file is its own plan's to report; it serves nothing we could change
        if section.get("role") != "infer" or section.get("environment") != env:
            continue
        for s in served_releases(section):
            offered.add(s.release)
            if model in (s.release, s.served):
                targets.append(Target(stack, path, s, version_at(section, s.keys)))
    if not targets:
        known = ", ".join(sorted(offered)) or "nothing (no inference.models in its infer stacks)"
        raise ConfigErrors(
            [ConfigError("MODEL", f"{model!r} is served by no infer stack of {env}", f"one of: {known}")]
        )
    return targets


def edited(target: Target, version: str) -> str:
    """The target's stack file with the model's version set to ``version``: only that scalar differs."""
    text = target.path.read_text()
    new = set_scalar(text, (*FILE_ROOT, *target.served.keys), version)
    assert version_at(_section(new), target.served.keys) == version, (target.path, target.served.keys)
    return new


def previous_version(target: Target) -> str | None:
    """The version the target's key named before its current value, from the git history of its stack
    file (newest commit first); None when the history has none (or the file is not in a git repository)."""
    folder, name = target.path.parent, target.path.name
    try:
        log = subprocess.run(
            ["git", "log", "--format=%H", "--", name], cwd=folder, capture_output=True, text=True, check=True
        ).stdout.split()
        prefix = subprocess.run(
            ["git", "rev-parse", "--show-prefix"], cwd=folder, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    for commit in log:
        shown = subprocess.run(
            ["git", "show", f"{commit}:{prefix}{name}"], cwd=folder, capture_output=True, text=True
        )
        if shown.returncode != 0:
            continue
        try:
            then = version_at(_section(shown.stdout), target.served.keys)
        except yaml.YAMLError:
            continue
        if then is not None and then != target.current:
            return then
    return None
