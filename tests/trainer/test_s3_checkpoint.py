"""Checkpoints to S3 (a moto server over HTTP) while the endpoint goes away, 2 ranks under the launcher."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from tests.trainer._support import (
    read_events,
    run_job,
    run_overrides,
    start_job,
    stop_process_group,
    wait_for,
)
from trainer import exitcodes
from trainer.checkpoint.checkpointer import validate_checkpoint
from trainer.checkpoint.store import S3Store
from trainer.tools.make_shards import upload
from trainer.tools.moto_server import MotoServer

# processes and servers: left out of `make test-fast`
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def committed_steps(d: Path) -> list[int]:
    return [e["step"] for e in read_events(d / "log_rank0.jsonl", "checkpoint") if e["committed"]]


def failed_steps(d: Path) -> list[int]:
    return [e["step"] for e in read_events(d / "log_rank0.jsonl", "checkpoint") if not e["committed"]]


def setup_buckets(s3: MotoServer, shards_dir: Path) -> None:
    s3.client().create_bucket(Bucket="train-data")
    s3.client().create_bucket(Bucket="train-ckpt")
    upload(shards_dir, "s3://train-data/shards/v1")


def overrides(d: Path, steps: int, policy: str, delay: float) -> list[str]:
    return run_overrides(
        d,
        "s3://train-data/shards/v1",  # fetched to the cache dir by local rank 0
        train__steps=steps,
        train__step_delay_s=delay,
        checkpoint__uri="s3://train-ckpt/run1",
        checkpoint__interval=3,
        checkpoint__s3_max_attempts=2,
        checkpoint__on_save_failure=policy,
    )


def test_endpoint_gone_with_stop_policy(moto_s3: MotoServer, shards_dir: Path, work_dir: Path) -> None:
    setup_buckets(moto_s3, shards_dir)
    d = work_dir / "run"
    log = work_dir / "launch.log"
    proc = start_job(2, overrides(d, 30, "stop", 0.3), extra=["--max-restarts=2"], log=log)
    try:
        wait_for(lambda: 3 in committed_steps(d), 90, "checkpoint 3 to commit")
        moto_s3.stop()  # the endpoint goes away
        rc = proc.wait(timeout=150)
    finally:
        stop_process_group(proc)
    out = log.read_text()
    # A deterministic stop: exit 3 at once, no restarts (torchrun restarted the workers up to 2 times).
    assert rc == exitcodes.SAVE_FAILED, out[-3000:]
    assert [len(read_events(d / f"log_rank{r}.jsonl", "start")) for r in (0, 1)] == [1, 1]
    assert "stopping because checkpoint.on_save_failure=stop" in out
    stops = [read_events(d / f"log_rank{r}.jsonl", "stop") for r in (0, 1)]
    assert stops[0] and stops[0][0]["step"] == stops[1][0]["step"]  # all ranks stop at the same step
    assert stops[0][0]["reason"] == "checkpoint_failed"
    failed = failed_steps(d)
    assert failed and failed[0] > 3

    moto_s3.start()  # endpoint back (same port, same objects)
    store = S3Store("s3://train-ckpt/run1")
    assert validate_checkpoint(store, 3, True) == ""
    for s in store.list_steps():
        if s > 3:
            assert validate_checkpoint(store, s, True) != "", f"step {s} looks valid after a failed save"
    # The previous checkpoint still loads: a new run resumes from it.
    r = run_job(2, overrides(d, 5, "stop", 0.0))
    assert r.returncode == 0, r.stderr[-4000:]
    assert read_events(d / "log_rank0.jsonl", "start")[-1]["resumed_from"] == 3
    assert [e["step"] for e in read_events(d / "log_rank0.jsonl", "step")][-2:] == [4, 5]


def test_endpoint_gone_with_continue_policy(moto_s3: MotoServer, shards_dir: Path, work_dir: Path) -> None:
    setup_buckets(moto_s3, shards_dir)
    d = work_dir / "run"
    log = work_dir / "launch.log"
    proc = start_job(2, overrides(d, 18, "continue", 0.3), log=log)
    try:
        wait_for(lambda: 3 in committed_steps(d), 90, "checkpoint 3 to commit")
        moto_s3.stop()
        wait_for(lambda: failed_steps(d), 90, "a failed save")
        moto_s3.start()
        rc = proc.wait(timeout=150)
    finally:
        stop_process_group(proc)
    out = log.read_text()
    assert rc == 0, out[-4000:]
    assert "checkpoint save for step" in out and "failed" in out
    steps = [e["step"] for e in read_events(d / "log_rank0.jsonl", "step")]
    assert steps == list(range(1, 19))  # kept training through the outage, no restart
    assert len(read_events(d / "log_rank0.jsonl", "start")) == 1
    store = S3Store("s3://train-ckpt/run1")
    assert committed_steps(d)[-1] == 18 and validate_checkpoint(store, 18, True) == ""
    for s in failed_steps(d):
        assert s not in store.list_steps() or validate_checkpoint(store, s, True) != ""
    # The run record sits next to the checkpoints in the bucket.
    keys = store.blobs.list("run-records")
    assert len(keys) == 2  # the start and the end record of the one attempt
    [rec] = [json.loads(store.blobs.read(f"run-records/{k}")) for k in keys if k.endswith(".end.json")]
    assert rec["exit"]["code"] == 0 and rec["checkpoints"]["latest"] == "s3://train-ckpt/run1/step_000000018"
    assert rec["artifacts"]["run_record"].startswith("s3://train-ckpt/run1/run-records/attempt-")


def test_sigterm_during_an_outage_exits_5_not_143(
    moto_s3: MotoServer, shards_dir: Path, work_dir: Path
) -> None:
    """The preemption save cannot be committed: the pod shows 5 ("preempted, save failed"), never 143."""
    setup_buckets(moto_s3, shards_dir)
    d = work_dir / "run"
    log = work_dir / "launch.log"
    proc = start_job(2, overrides(d, 30, "continue", 0.3), log=log)
    try:
        wait_for(lambda: 3 in committed_steps(d), 90, "checkpoint 3 to commit")
        moto_s3.stop()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
    finally:
        stop_process_group(proc)
    out = log.read_text()
    assert rc == exitcodes.PREEMPTED_SAVE_FAILED, out[-3000:]
    assert "Traceback" not in out
    pre = [read_events(d / f"log_rank{r}.jsonl", "preempted") for r in (0, 1)]
    # The newest checkpoint committed before the store went away: 3, or a later one when a save landed
    # while the server was stopping (stop() takes longer than one checkpoint interval on a loaded machine).
    committed = committed_steps(d)
    assert pre[0] and pre[0][0]["step"] == pre[1][0]["step"] and pre[0][0]["committed"] == max(committed) >= 3
    assert pre[0][0]["step"] not in committed  # the preemption save itself was not committed
