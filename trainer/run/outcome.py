"""How a worker tells the launcher why it exits: one small JSON file per rank and attempt.

The elastic agent only sees exit codes, and only of the workers it did not have to kill; after SIGTERM it
sees none at all. Each ``trainer.train`` process writes ``rank<R>.attempt<N>.json`` (exit code and its
one-line reason) into ``$AIPLAT_OUTCOME_DIR`` just before it exits; ``trainer.run.launch`` reads the newest
attempt's files. Stdlib only.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

ENV = "AIPLAT_OUTCOME_DIR"
_NAME = re.compile(r"^rank(\d+)\.attempt(\d+)\.json$")


@dataclass(frozen=True)
class Outcome:
    """One worker's exit as it reported it."""

    rank: int
    attempt: int
    code: int
    message: str


def write_outcome(code: int, message: str = "") -> None:
    """Record this worker's exit code (no-op unless the launcher set ``$AIPLAT_OUTCOME_DIR``)."""
    d = os.environ.get(ENV)
    if not d:
        return
    rank = int(os.environ.get("RANK", "0"))
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    path = Path(d) / f"rank{rank}.attempt{attempt}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"code": code, "message": message[:2000]}))
    os.replace(tmp, path)


def read_outcomes(directory: str | os.PathLike[str]) -> dict[int, Outcome]:
    """``{rank: outcome}`` of the newest attempt that reported anything."""
    found: list[Outcome] = []
    for p in Path(directory).iterdir() if Path(directory).is_dir() else []:
        if m := _NAME.match(p.name):
            try:
                data = json.loads(p.read_text())
                found.append(
                    Outcome(int(m.group(1)), int(m.group(2)), int(data["code"]), str(data["message"]))
                )
            except (OSError, ValueError, KeyError, TypeError):
                continue
    if not found:
        return {}
    newest = max(o.attempt for o in found)
    return {o.rank: o for o in found if o.attempt == newest}
