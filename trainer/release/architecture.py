"""The tensors a release folder must hold, from the architecture's own definition: asked of
``python -m trainer.modelcheck.expected`` (the pinned transformers' model class of ``config.json``, built on
the meta device) in a process of its own, so the publisher imports no torch and no transformers."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

TIMEOUT_S = 600  # building a 70B-parameter model on the meta device takes seconds; importing torch more


class ExpectedError(Exception):
    """transformers could not build the architecture from the config (the reason, one line)."""


def expected_tensors(config: bytes, python: str | None = None) -> dict[str, Any]:
    """:func:`describe` of ``config`` (a ``config.json``'s bytes), run in a process of its own;
    :class:`ExpectedError` with its one line when the architecture cannot be built. Asked once per config
    and interpreter in a process (an adapter's base is asked again for each adapter of it)."""
    return dict(json.loads(_expected(config, python)))


@functools.lru_cache(maxsize=8)
def _expected(config: bytes, python: str | None) -> str:
    with tempfile.TemporaryDirectory(prefix="expected-") as tmp:
        path = Path(tmp) / "config.json"
        path.write_bytes(config)
        done = subprocess.run(
            [python or sys.executable, "-m", "trainer.modelcheck.expected", str(path)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    if done.returncode == 2:
        raise ExpectedError(done.stderr.strip().splitlines()[-1].removeprefix("error: "))
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-3:])
        raise ExpectedError(f"the architecture check failed (exit {done.returncode}): {tail[:400]}")
    return done.stdout
