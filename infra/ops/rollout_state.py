"""Which stacks a rollout runs (``--stack``, ``--wave``, ``--model-only``, ``--resume``) and what it
finished: ``build/rollout/<env>.json``, one entry per stack, written as each stack ends, so a rollout that
stopped resumes after the stacks that finished."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from pathlib import Path

from infra.core.config import Role
from infra.core.errors import ConfigError, ConfigErrors
from infra.io.stackfiles import project_root
from infra.ops.rollout import FINISHED, StackResult
from infra.schema.platform import PlatformConfig


def state_file(env: str, root: Path | None = None) -> Path:
    return (root or project_root()) / "build" / "rollout" / f"{env}.json"


def read_state(path: Path) -> dict[str, dict[str, object]]:
    """stack -> {state, wave, at} of the last rollout of the environment (empty when there is none)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    stacks = doc.get("stacks") if isinstance(doc, dict) else None
    return stacks if isinstance(stacks, dict) else {}


def finished(path: Path) -> set[str]:
    """The stacks the last rollout finished (deployed and healthy, or deployed with no model release)."""
    done = {state.value for state in FINISHED}
    return {s for s, entry in read_state(path).items() if entry.get("state") in done}


def _write(path: Path, stacks: dict[str, dict[str, object]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"stacks": stacks}, indent=2) + "\n")
    tmp.replace(path)  # rewritten whole: a reader never sees half of it


def record(path: Path, result: StackResult) -> None:
    """Write one stack's result."""
    stacks = read_state(path)
    stacks[result.stack] = {
        "state": result.state.value,
        "wave": result.wave + 1,
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    _write(path, stacks)


def forget(path: Path, names: Collection[str]) -> None:
    """A new rollout of ``names``: their earlier results no longer say they are done."""
    stacks = read_state(path)
    if any(n in stacks for n in names):
        _write(path, {s: e for s, e in stacks.items() if s not in names})


def select_waves(
    waves: list[list[str]],
    configs: Mapping[str, PlatformConfig],
    *,
    stacks: Collection[str] = (),
    wave: int | None = None,
    model_only: bool = False,
    skip: Collection[str] = (),
) -> list[list[str]]:
    """The waves with only the stacks asked for, in their order: ``stacks`` (by name), ``wave`` (1-based),
    ``model_only`` (the infer stacks: a model rollout or rollback leaves the train wave alone), less
    ``skip`` (what a resumed rollout finished); empty waves dropped."""
    everything = [s for w in waves for s in w]
    unknown = [s for s in stacks if s not in everything]
    problems = []
    if unknown:
        problems.append(ConfigError("--stack", f"{unknown} is not in these waves", f"one of {everything}"))
    if wave is not None and not 1 <= wave <= len(waves):
        problems.append(ConfigError("--wave", f"{wave} is not a wave", f"1 to {len(waves)}"))
    if problems:
        raise ConfigErrors(problems)
    out = []
    for i, names in enumerate(waves):
        kept = [
            s
            for s in names
            if (not stacks or s in stacks)
            and (wave is None or wave == i + 1)
            and (not model_only or configs[s].role is Role.infer)
            and s not in skip
        ]
        if kept:
            out.append(kept)
    return out
