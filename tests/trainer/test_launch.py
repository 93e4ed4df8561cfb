"""``python -m trainer.run.launch``: one-time checks before any worker starts, and the exit code a pod shows.

SIGTERM (143 / 5) and "save failed" (3) through the launcher are in test_distributed.py and
test_s3_checkpoint.py; exit-code combination rules are unit-tested here.
"""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.trainer._support import Job, run_job, run_overrides
from trainer import exitcodes
from trainer.run import launch
from trainer.run.launch import combine_outcomes
from trainer.run.ports import free_port
from trainer.tools.commands import DEBUG_CONFIG, trainer_command
from trainer.tools.make_shards import upload
from trainer.tools.moto_server import MotoServer
from trainer.training.distributed import DistInfo

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


def debug_checkpoint(info: DistInfo, root: Path, step: int) -> None:
    """A committed checkpoint of the debug model at ``step`` (what an earlier run left)."""
    job = Job(0)
    ck = job.ckpt(str(root), info, async_save=False)
    job.step(step)
    assert ck.save(step, blocking=True).committed  # type: ignore[union-attr]
    ck.close()


Case = Callable[[Path, Path, MotoServer, DistInfo], tuple[dict, dict]]


def missing_local_dataset(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    return {"data__source": d / "no-such-dir"}, {}


def missing_s3_dataset(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    s3.client().create_bucket(Bucket="data")
    return {"data__source": "s3://data/not-uploaded"}, {}


def unreachable_s3_endpoint(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    dead = f"http://127.0.0.1:{free_port()}"
    return {"data__source": "s3://data/x", "data__store_wait_s": 1}, {"AWS_ENDPOINT_URL": dead}


def config_error(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    return {"train__steps": 0}, {}


def model_of_another_size(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    debug_checkpoint(info, d / "ckpt", 2)
    return {"model__d_model": 64, "train__steps": 10}, {}


def model_with_other_heads(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    debug_checkpoint(info, d / "ckpt", 2)  # same tensor shapes, other attention
    return {"model__n_head": 4, "train__steps": 10}, {}


def already_complete(d: Path, shards: Path, s3: MotoServer, info: DistInfo) -> tuple[dict, dict]:
    debug_checkpoint(info, d / "ckpt", 6)
    return {"train__steps": 4}, {}


REAL_PROCESS = (missing_local_dataset, unreachable_s3_endpoint)  # also run as `python -m trainer.run.launch`


@pytest.mark.parametrize(
    ("case", "code", "message"),
    [
        (missing_local_dataset, exitcodes.BAD_INPUT, r"error: data.source=.*no-such-dir.*no index.json"),
        (
            missing_s3_dataset,
            exitcodes.BAD_INPUT,
            r"error: data.source=s3://data/not-uploaded: no index.json",
        ),
        (
            unreachable_s3_endpoint,
            exitcodes.STORE_UNAVAILABLE,
            r"error: data.source=s3://data/x: unreachable",
        ),
        (config_error, exitcodes.BAD_INPUT, r"error: config error: train.steps=0: must be >= 1"),
        (
            model_of_another_size,
            exitcodes.BAD_INPUT,
            r"error: .*another model: model.d_model=32 .* 64 in the",
        ),
        (model_with_other_heads, exitcodes.BAD_INPUT, r"error: .*another model: model.n_head=2 .* 4 in the"),
        (already_complete, exitcodes.OK, r"already complete: checkpoint at step 6 >= train.steps=4"),
    ],
    ids=lambda v: getattr(v, "__name__", None) if callable(v) else None,
)
def test_checks_before_workers_start(
    case: Case,
    code: int,
    message: str,
    work_dir: Path,
    shards_dir: Path,
    moto_s3: MotoServer,
    info: DistInfo,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before (torchrun --max-restarts=2 -m trainer.train): a traceback from every rank, three attempts,
    exit 1 for the data and checkpoint cases; the config error was restarted too; the n_head case trained
    on silently; the complete case exited 1 after "final checkpoint was not committed"."""
    kv, env = case(work_dir, shards_dir, moto_s3, info)
    overrides = run_overrides(work_dir, shards_dir, **kv)
    t0 = time.monotonic()
    if case in REAL_PROCESS:
        r = run_job(2, overrides, extra=["--max-restarts=2"], env=env, timeout=90)
        rc, err = r.returncode, r.stderr
    else:  # the same main() in this process (saves a Python + torch start per case)
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        handler = signal.getsignal(signal.SIGTERM)
        try:
            rc = launch.main(trainer_command(2, DEBUG_CONFIG, overrides, extra=["--max-restarts=2"])[3:])
        finally:
            signal.signal(signal.SIGTERM, handler)
        err = capsys.readouterr().err
    took = time.monotonic() - t0
    assert rc == code, err[-3000:]
    assert "Traceback" not in err, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert re.search(message, last), last
    assert not (work_dir / "log_rank0.jsonl").exists(), "workers were started"
    assert took < 60, took


def test_data_shards_listed_in_the_index_must_exist(
    work_dir: Path, shards_dir: Path, moto_s3: MotoServer
) -> None:
    moto_s3.client().create_bucket(Bucket="data")
    upload(shards_dir, "s3://data/v1")
    victim = sorted(p.name for p in shards_dir.glob("*.bin"))[-1]
    moto_s3.client().delete_object(Bucket="data", Key=f"v1/{victim}")
    r = run_job(2, run_overrides(work_dir, "s3://data/v1"), timeout=90)
    assert r.returncode == exitcodes.BAD_INPUT, r.stderr[-3000:]
    assert f"data.source=s3://data/v1: {victim} is missing" in r.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize(
    ("codes", "sigterm", "want"),
    [
        ([0, 0], False, exitcodes.OK),
        ([143, 143], True, exitcodes.PREEMPTED),
        ([143, None], True, exitcodes.PREEMPTED_SAVE_FAILED),  # a rank killed before it reported
        ([5, 5], True, exitcodes.PREEMPTED_SAVE_FAILED),
        ([None, None], True, exitcodes.PREEMPTED_SAVE_FAILED),
        ([3, None], False, exitcodes.SAVE_FAILED),  # the others were stopped while blocked
        ([2, 1], False, exitcodes.BAD_INPUT),
        ([4, None], False, exitcodes.STORE_UNAVAILABLE),
        ([1, None], False, exitcodes.CRASH),
        ([None, None], False, exitcodes.CRASH),
    ],
)
def test_combine_outcomes(codes: list[int | None], sigterm: bool, want: int) -> None:
    assert combine_outcomes(codes, sigterm=sigterm) == want
