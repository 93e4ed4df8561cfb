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

from trainer.distributed import free_port  # noqa: E402
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
def tmp_path(trainer_tmp_root: Path, request: pytest.FixtureRequest) -> Path:
    """Per-test directory under :func:`trainer_tmp_root` (overrides pytest's ``tmp_path`` here)."""
    d = trainer_tmp_root / request.node.name[:60].replace("[", "_").replace("]", "_")
    d.mkdir(parents=True, exist_ok=False)
    return d


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
