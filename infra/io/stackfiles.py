"""Stack files: find them, read one, and summarise all of them for the cross-stack rules.

A stack file (``stacks/Pulumi.<stack>.yaml``) holds one key of ours, ``aiplat:platform``, validated by the
schema through ``infra.schema.parse``. This module only reads files; the checks between stacks are
rules (``infra/stack/cross_stack.py``) over the ``StackIndex`` read here.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

from infra.core.errors import ConfigError, ConfigErrors
from infra.core.project import ALLOWED_FOREIGN_KEYS, CONFIG_KEY, PROJECT
from infra.core.stacks import StackIndex, StackSummary
from infra.edge.config import API_KEYS_KEY
from infra.edge.rules import serving_terms
from infra.inference.config import InferenceConfig
from infra.io.yaml_files import DuplicateKeyError, duplicate_key_fix, load_yaml
from infra.monitoring.config import RECEIVER_SECRET_PREFIX
from infra.network.config import NetworkConfig
from infra.schema.parse import parse_platform_config
from infra.schema.platform import PlatformConfig

_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def project_root(start: Path | None = None) -> Path:
    """The folder holding this project's ``Pulumi.yaml``: the working directory or one above it
    (``pulumi up`` runs the program there), else the checkout this package was imported from."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        project = folder / "Pulumi.yaml"
        if project.is_file() and _project_name(project) == PROJECT:
            return folder
    return _PACKAGE_ROOT


def _mapping(path: Path) -> dict[str, Any]:
    """The YAML mapping in ``path``; empty when the file is unreadable, not YAML or not a mapping."""
    try:
        doc = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _project_name(path: Path) -> str | None:
    return _mapping(path).get("name")


def default_stacks_dir() -> Path:
    """``stackConfigDir`` of the project's ``Pulumi.yaml`` (``stacks``)."""
    root = project_root()
    return root / str(_mapping(root / "Pulumi.yaml").get("stackConfigDir") or ".")


def stack_file(stack: str, stacks_dir: Path | None = None) -> Path:
    return (stacks_dir or default_stacks_dir()) / f"Pulumi.{stack}.yaml"


def list_stacks(stacks_dir: Path | None = None) -> list[str]:
    folder = stacks_dir or default_stacks_dir()
    return sorted(p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in folder.glob("Pulumi.*.yaml"))


def display_path(path: Path) -> str:
    """``stacks/Pulumi.x.yaml`` for files of the project, else the path as given."""
    try:
        return str(path.resolve().relative_to(project_root()))
    except ValueError:
        return str(path)


def load_stack_config(stack: str, stacks_dir: Path | None = None) -> PlatformConfig:
    """Read ``Pulumi.<stack>.yaml`` from the stacks folder and validate it against the schema."""
    path = stack_file(stack, stacks_dir)
    source = display_path(path)
    if not path.exists():
        known = list_stacks(stacks_dir)
        close = difflib.get_close_matches(stack, known, n=1)
        fix = f"did you mean '{close[0]}'?" if close else f"use one of: {', '.join(known)}"
        raise ConfigErrors([ConfigError("--stack", f"no stack file {source}", fix)])
    try:
        doc = load_yaml(path.read_text()) or {}
    except DuplicateKeyError as exc:
        raise ConfigErrors([ConfigError("(file)", str(exc), duplicate_key_fix(exc), source=source)]) from None
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
    receiver_keys = {k for k in config if k.startswith(f"{PROJECT}:{RECEIVER_SECRET_PREFIX}")}
    for key in config:
        if key == CONFIG_KEY or key in ALLOWED_FOREIGN_KEYS:
            continue
        if key == API_KEYS_KEY:
            # the inference API keys (infra/edge/wire.py): only as a Pulumi secret
            value = config[key]
            if not (isinstance(value, dict) and set(value) == {"secure"}):
                errors.append(
                    ConfigError(
                        key,
                        "API keys in plain text",
                        f"remove them and run `pulumi config set --secret --path '{key}[0]' <key>` per key",
                        source=source,
                    )
                )
            continue
        if key in receiver_keys:
            # an Alertmanager receiver's URL: only as a Pulumi secret (the stack file keeps ciphertext)
            value = config[key]
            if not (isinstance(value, dict) and set(value) == {"secure"}):
                errors.append(
                    ConfigError(
                        key,
                        "a receiver URL in plain text",
                        f"remove it and run `pulumi config set --secret {key} <url>`",
                        source=source,
                    )
                )
            continue
        if key == "aws:region":
            errors.append(
                ConfigError(
                    key, "set here", f"set {CONFIG_KEY}.region instead (one source of truth)", source=source
                )
            )
            continue
        close = difflib.get_close_matches(key, [CONFIG_KEY, *sorted(ALLOWED_FOREIGN_KEYS)], n=1, cutoff=0.6)
        fix = f"did you mean '{close[0]}'?" if close else f"remove it; this project reads only {CONFIG_KEY}"
        errors.append(ConfigError(key, "unknown config key", fix, source=source))
    if CONFIG_KEY not in config:
        errors.append(
            ConfigError(CONFIG_KEY, "required key is missing", "add it to the stack file", source=source)
        )
    if errors:
        raise ConfigErrors(errors)
    try:
        cfg = parse_platform_config(config[CONFIG_KEY])
    except ConfigErrors as exc:
        raise ConfigErrors([e.with_source(source) for e in exc.errors]) from None
    # a receiver secret with no receiver of that name is a typo or a leftover
    named = {f"{PROJECT}:{k}" for k in cfg.monitoring.receiver_secret_keys().values()}
    stray = sorted(receiver_keys - named)
    if stray:
        errors = []
        for key in stray:
            close = difflib.get_close_matches(key, sorted(named), n=1, cutoff=0.6)
            fix = (
                f"did you mean '{close[0]}'?"
                if close
                else f"add receiver '{key.removeprefix(f'{PROJECT}:{RECEIVER_SECRET_PREFIX}')}' under "
                f"{CONFIG_KEY}.monitoring.alertmanager.receivers, or remove the key"
            )
            errors.append(ConfigError(key, "secret of no receiver", fix, source=source))
        raise ConfigErrors(errors)
    return cfg


def _platform_section(path: Path) -> dict[str, Any]:
    section = (_mapping(path).get("config") or {}).get(CONFIG_KEY)
    return section if isinstance(section, dict) else {}


def read_stack_index(stacks_dir: Path | None = None) -> StackIndex:
    """Role, region, replication targets, VPC CIDR and source stack of every stack file in the folder.

    Read tolerantly: a broken neighbour is reported by its own plan, not by the stacks that look at it.
    """
    folder = stacks_dir or default_stacks_dir()
    stacks: dict[str, StackSummary] = {}
    for stack in list_stacks(folder):
        section = _platform_section(stack_file(stack, folder))
        storage = section.get("storage") if isinstance(section.get("storage"), dict) else {}
        targets = storage.get("replicate_to") if isinstance(storage.get("replicate_to"), list) else []
        images = section.get("images") if isinstance(section.get("images"), dict) else {}
        builds = images.get("builds") if isinstance(images.get("builds"), dict) else {}
        network = section.get("network") if isinstance(section.get("network"), dict) else {}
        security = section.get("security") if isinstance(section.get("security"), dict) else {}
        account = security.get("account") if isinstance(security.get("account"), dict) else {}
        stacks[stack] = StackSummary(
            role=str(section.get("role", "")),
            region=str(section.get("region", "")),
            environment=str(section.get("environment", "")),
            replicate_to=tuple(str(t) for t in targets),
            images=tuple(sorted(str(b) for b in builds)),
            # unset: the schema's default, which that stack's VPC gets
            vpc_cidr=str(network.get("vpc_cidr") or NetworkConfig.model_fields["vpc_cidr"].default),
            source_stack=str(storage.get("source_stack") or ""),
            serving=_serving(section, str(storage.get("source_stack") or "")),
            account_id=str(account.get("id") or ""),
            allow_shared_account=account.get("allow_shared_account") is True,
        )
    return StackIndex(stacks)


def _serving(section: dict[str, Any], source_stack: str) -> tuple[tuple[str, str], ...]:
    """The global endpoint terms of an infer stack (``infra/edge/rules.py``), from its ``inference``
    section validated on its own (defaults filled in, as its own plan sees them); empty when it is not
    valid (its own plan reports that)."""
    try:
        inference = InferenceConfig.model_validate(section.get("inference"))
    except ValueError:
        return ()
    return serving_terms(inference, source_stack)
