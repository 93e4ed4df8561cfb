"""Fixtures for the trainer tests: token shards, a world of one in-process, a moto S3 server over HTTP."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.release_keys import release_keys
from tests.trainer._support import (
    REF_INTERVAL,
    REF_STEPS,
    logged_steps,
    make_corpus,
    ok,
    run_job,
    run_overrides,
)
from trainer.config import load_config
from trainer.tools.commands import DEBUG_CONFIG
from trainer.tools.make_shards import encode, write_shards
from trainer.training.distributed import DistInfo, destroy_distributed, init_distributed
from trainer.training.loop import Trainer


@pytest.fixture(scope="session")
def trainer_tmp_root() -> Iterator[Path]:
    """A private temp root: pytest's shared ``/tmp/pytest-of-<user>`` keeps only the last 3 sessions, so a
    concurrent pytest run on the same machine could delete directories that running torchrun jobs use."""
    root = Path(tempfile.mkdtemp(prefix="trainer-tests-"))
    yield root
    if not os.environ.get("TRAINER_TESTS_KEEP"):  # set it to inspect logs and checkpoints after a run
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def release_key_pair(trainer_tmp_root: Path) -> Iterator[tuple[Path, Path]]:
    """The release signing key pair every publish and every release read of these tests uses."""
    with release_keys(trainer_tmp_root / "release-keys") as pair:
        yield pair


@pytest.fixture()
def work_dir(trainer_tmp_root: Path, request: pytest.FixtureRequest) -> Path:
    """A new directory under :func:`trainer_tmp_root` for one test (pytest's ``tmp_path`` is left alone)."""
    name = "".join(c if c.isalnum() or c in "-_" else "_" for c in request.node.name)[:50]
    return Path(tempfile.mkdtemp(prefix=f"{name}-", dir=trainer_tmp_root))


@pytest.fixture(scope="session")
def info() -> Iterator[DistInfo]:
    """A world of one (gloo) in the pytest process, for in-process checkpoint tests."""
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    saved = {k: os.environ.get(k) for k in keys}
    yield init_distributed(60)
    destroy_distributed()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def shards_dir(trainer_tmp_root: Path) -> Path:
    """~150k byte tokens in a few shards."""
    out = trainer_tmp_root / "shards"
    write_shards(encode(make_corpus()), out, shard_tokens=40_000)
    return out


@pytest.fixture(scope="session")
def reference(trainer_tmp_root: Path, shards_dir: Path) -> Path:
    """An uninterrupted 2-rank run of REF_STEPS steps, checkpoint every REF_INTERVAL."""
    d = trainer_tmp_root / "reference"
    ok(run_job(2, run_overrides(d, shards_dir, train__steps=REF_STEPS, checkpoint__interval=REF_INTERVAL)))
    assert logged_steps(d) == list(range(1, REF_STEPS + 1))
    return d


@pytest.fixture()
def make_trainer(info: DistInfo, shards_dir: Path, work_dir: Path) -> Iterator[Callable[..., Trainer]]:
    """Trainers in this process on the session's world of one; signal handlers restored afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)}
    made: list[Trainer] = []

    def make(run_dir: Path | None = None, **kv: Any) -> Trainer:
        shards = kv.pop("shards", shards_dir)
        t = Trainer(load_config(DEBUG_CONFIG, run_overrides(run_dir or work_dir, shards, **kv)))
        made.append(t)
        return t

    yield make
    for t in made:
        t.close()
    for s, h in saved.items():
        signal.signal(s, h)
