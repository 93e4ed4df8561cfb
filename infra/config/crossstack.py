"""Checks that span stacks: replication targets must be inference regions, and an infer stack's
``storage.source_stack`` must be a train stack that replicates to it.

"Inference regions" are the regions of this project's infer stacks, i.e. the stack files next to the
one being checked. Only ``role`` and ``region`` of the other files are read (tolerantly: a broken
neighbour is reported by its own plan, not here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from infra.config.loader import CONFIG_KEY, list_stacks, stack_file
from infra.config.schema import PlatformConfig, Role
from infra.errors import ConfigError


def _platform_of(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}
    section = (doc.get("config") or {}).get(CONFIG_KEY) if isinstance(doc, dict) else None
    return section if isinstance(section, dict) else {}


def stack_roles(stacks_dir: Path | None = None) -> dict[str, tuple[str, str]]:
    """stack name -> (role, region), for every stack file in the folder."""
    out: dict[str, tuple[str, str]] = {}
    for stack in list_stacks(stacks_dir):
        section = _platform_of(stack_file(stack, stacks_dir))
        out[stack] = (str(section.get("role", "")), str(section.get("region", "")))
    return out


def inference_regions(stacks_dir: Path | None = None) -> dict[str, str]:
    """region -> infer stack, for this project's infer stacks."""
    return {
        region: stack for stack, (role, region) in sorted(stack_roles(stacks_dir).items()) if role == "infer"
    }


def check_cross_stack(cfg: PlatformConfig, stacks_dir: Path | None = None) -> list[ConfigError]:
    """Every cross-stack problem of ``cfg``, each naming the field, the value and the fix."""
    errors: list[ConfigError] = []
    infer = inference_regions(stacks_dir)
    for i, region in enumerate(cfg.storage.replicate_to):
        if region not in infer:
            known = ", ".join(sorted(infer)) or "none"
            errors.append(
                ConfigError(
                    f"{CONFIG_KEY}.storage.replicate_to.{i}",
                    f"{region!r} is not an inference region "
                    f"(regions of this project's infer stacks: {known})",
                    "replicate only to a region that has an infer stack, or add that stack first",
                )
            )
    source = cfg.storage.source_stack
    if cfg.role == Role.infer and source:
        where = f"{CONFIG_KEY}.storage.source_stack"
        roles = stack_roles(stacks_dir)
        if source not in roles:
            known = ", ".join(s for s, (role, _) in sorted(roles.items()) if role == "train") or "none"
            errors.append(ConfigError(where, f"no stack {source!r}", f"use one of the train stacks: {known}"))
        elif roles[source][0] != "train":
            errors.append(
                ConfigError(
                    where, f"{source!r} is a {roles[source][0] or 'role-less'} stack", "name a train stack"
                )
            )
        else:
            targets = _platform_of(stack_file(source, stacks_dir)).get("storage", {}).get("replicate_to", [])
            if cfg.region not in (targets or []):
                errors.append(
                    ConfigError(
                        where,
                        f"{source!r} does not replicate to {cfg.region}",
                        f"add {cfg.region} to storage.replicate_to of {source}",
                    )
                )
    return errors
