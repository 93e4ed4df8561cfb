"""Fixtures for the fetch tool's tests: a checkpoint from a real (tiny, CPU) training run, releases exported
from it with trainer.export.hf and published with trainer.release.publish, ways to break a release, and the
tool run
as the image runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.inference.importguard import build_site
from tests.support.release_keys import release_keys
from tests.trainer._support import make_corpus
from trainer.export.hf import export
from trainer.release.manifest import WEIGHTS, Release
from trainer.release.publish import publish
from trainer.tools.make_shards import encode, write_shards

REPO = Path(__file__).resolve().parents[2]
MODEL = "gpt-debug"


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for a child process: the repo importable, one torch thread (2 shared CI cores)."""
    dist_vars = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    env = {k: v for k, v in os.environ.items() if k not in dist_vars}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    env.update(extra or {})
    return env


def train(workdir: Path, checkpoint_uri: str, steps: int = 4, interval: int = 2) -> None:
    """``python -m trainer.train`` on CPU (the debug model), checkpoints every ``interval`` steps."""
    shards = workdir / "shards"
    if not (shards / "index.json").exists():
        write_shards(encode(make_corpus(60)), shards, shard_tokens=40_000)
    cmd = [sys.executable, "-m", "trainer.train", "--config", str(REPO / "trainer/configs/debug.toml")]
    for kv in (
        f"data.source={shards}",
        f"data.cache_dir={workdir / 'data-cache'}",
        f"checkpoint.uri={checkpoint_uri}",
        f"train.steps={steps}",
        f"checkpoint.interval={interval}",
        "checkpoint.async_save=false",
        "metrics.port_base=0",
    ):
        cmd += ["--set", kv]
    r = subprocess.run(cmd, cwd=REPO, env=child_env(), capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


@pytest.fixture(scope="session")
def inference_tmp() -> Iterator[Path]:
    """A private temp root for the session (see tests/trainer/conftest.py for why not pytest's)."""
    root = Path(tempfile.mkdtemp(prefix="inference-tests-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def release_key_pair(inference_tmp: Path) -> Iterator[tuple[Path, Path]]:
    """The release signing key pair: trainer.release.publish signs with it, the fetch tool (a child process,
    through the environment) trusts its public half."""
    with release_keys(inference_tmp / "release-keys") as pair:
        yield pair


@pytest.fixture(scope="session")
def checkpoints(inference_tmp: Path) -> Path:
    """A local checkpoint directory of a 4-step debug run, committed at steps 2 and 4."""
    uri = inference_tmp / "ckpt"
    train(inference_tmp, str(uri))
    return uri


@pytest.fixture()
def work(inference_tmp: Path, request: pytest.FixtureRequest) -> Path:
    """A new directory for one test."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)[:50]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=inference_tmp))


@pytest.fixture(scope="session")
def image_site(inference_tmp: Path) -> Path:
    """Only what the fetch image installs (tests/inference/importguard.py): no torch, no transformers."""
    return build_site(inference_tmp / "image-site")


def run_fetch(site: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m inference.fetch ARGS`` as the image runs it: ``python -S`` with only the image's
    libraries and the repo's packages importable."""
    child = child_env(env)
    child["PYTHONPATH"] = str(site)
    return subprocess.run(
        [sys.executable, "-S", "-m", "inference.fetch", *args],
        cwd=site,
        env=child,
        capture_output=True,
        text=True,
        timeout=300,
    )


class Publisher:
    """Publishes releases of ``checkpoints`` to ``root``, one minute apart: each step exported once (a GPT-2
    folder beside ``root``), then published from that folder with trainer.release.publish."""

    def __init__(self, checkpoints: Path | str, root: Path | str) -> None:
        self.checkpoints = str(checkpoints)
        self.root = str(root)
        self.t = datetime.now(UTC).replace(microsecond=0)
        self.folders: dict[int, str] = {}

    def __call__(self, step: int) -> Release:
        self.t += timedelta(minutes=1)
        if step not in self.folders:
            self.folders[step] = f"{self.root.rstrip('/')}-exports/step{step}"
            export(self.checkpoints, step, self.folders[step])
        return publish(self.folders[step], self.root, MODEL, step=step, now=self.t)


def version_dir(root: Path, version: str) -> Path:
    """The folder of a release in a local release root."""
    return root / "release" / MODEL / version


def flip_byte(path: Path) -> None:
    """Corrupt a file without changing its size (only the sha256 check can see it)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def corrupt_release(root: Path, version: str) -> None:
    """A weights file whose bytes no longer match the manifest."""
    flip_byte(version_dir(root, version) / WEIGHTS)
