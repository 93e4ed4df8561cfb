"""The one place that builds the command line that starts training ranks (tests, ``make train-local``)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEBUG_CONFIG = REPO / "trainer/configs/debug.toml"


def trainer_command(
    nproc: int,
    config: str | Path = DEBUG_CONFIG,
    overrides: Iterable[str] = (),
    *,
    extra: Sequence[str] = (),
    launcher: bool = True,
    python: str = sys.executable,
) -> list[str]:
    """Ranks on this machine: ``python -m trainer.run.launch --standalone --nproc-per-node N [extra] --config
    FILE --set k=v ...``, or with ``launcher=False`` the same ranks under plain torchrun
    (``python -m torch.distributed.run ... -m trainer.train ...``)."""
    cmd = [python, "-m", "trainer.run.launch" if launcher else "torch.distributed.run", "--standalone"]
    cmd += [f"--nproc-per-node={nproc}", *extra]
    if not launcher:
        cmd += ["-m", "trainer.train"]
    cmd += ["--config", str(config)]
    for o in overrides:
        cmd += ["--set", o]
    return cmd
