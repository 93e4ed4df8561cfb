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
    python: str = sys.executable,
) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc-per-node N [extra] -m trainer.train
    --config FILE --set k=v ...`` on this machine."""
    cmd = [python, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *extra]
    cmd += ["-m", "trainer.train", "--config", str(config)]
    for o in overrides:
        cmd += ["--set", o]
    return cmd
