"""Fixtures for the trainer tests: token shards and a real moto S3 server over HTTP."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# The tests import the package from the working tree, whether or not it is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from _trainer_support import MotoS3, make_corpus  # noqa: E402

from trainer.distributed import DistInfo, destroy_distributed, free_port, init_distributed  # noqa: E402
from trainer.tools.make_shards import encode, write_shards  # noqa: E402


@pytest.fixture(scope="session")
def trainer_tmp_root() -> Iterator[Path]:
    """A private temp root: pytest's shared ``/tmp/pytest-of-<user>`` keeps only the last 3 sessions, so a
    concurrent pytest run on the same machine could delete directories that running torchrun jobs use."""
    root = Path(tempfile.mkdtemp(prefix="trainer-tests-"))
    yield root
    if not os.environ.get("TRAINER_TESTS_KEEP"):  # set it to inspect logs and checkpoints after a run
        shutil.rmtree(root, ignore_errors=True)


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


@pytest.fixture()
def moto_s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoS3]:
    """A running moto S3 server; ``AWS_*`` variables point boto3 and the S3 connector at it."""
    s3 = MotoS3(port=free_port())
    s3.env = {
        "AWS_ENDPOINT_URL": s3.endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    for k, v in s3.env.items():
        monkeypatch.setenv(k, v)
    s3.start()
    # moto keeps its backends in this process across servers: start each test from an empty S3.
    urllib.request.urlopen(urllib.request.Request(f"{s3.endpoint}/moto-api/reset", method="POST"), timeout=10)
    try:
        yield s3
    finally:
        s3.stop()
