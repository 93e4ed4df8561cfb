"""A store that hangs (accepts, never answers), not one that refuses: real torchrun + gloo ranks under the
launcher, moto behind :class:`HoldProxy`. Side writes never cost a preemption checkpoint its exit code or a
run its start, and a hang at start ends in the documented exit code with one line
(docs/reference/exit-codes.md)."""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer._holdproxy import HoldProxy
from tests.trainer._support import (
    REF_STEPS,
    assert_bitwise_equal,
    final_tensors,
    load_checkpoint_tensors,
    logged_steps,
    ok,
    read_events,
    run_job,
    run_overrides,
    start_job,
    stop_process_group,
    wait_for,
)
from trainer import exitcodes
from trainer.checkpoint.checkpointer import validate_checkpoint
from trainer.checkpoint.sidewrites import SideWriter
from trainer.checkpoint.store import S3Store, step_dir_name
from trainer.config import load_config
from trainer.run.runrecord import PREFIX
from trainer.tools.commands import DEBUG_CONFIG
from trainer.tools.make_shards import upload
from trainer.tools.moto_server import MotoServer

# processes and servers: left out of `make test-fast`
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CKPT = "s3://ckpt/run"
ABANDONED = "abandoned the run record"


@pytest.fixture()
def proxy(moto_s3: MotoServer) -> Iterator[HoldProxy]:
    """A pass-through proxy in front of the test's moto server (``hold()`` it to make the store hang)."""
    moto_s3.client().create_bucket(Bucket="ckpt")
    with HoldProxy(moto_s3.port) as p:
        yield p


def stored_records(s3: MotoServer) -> list[str]:
    """Run-record keys in the bucket, read straight from moto (not through the proxy)."""
    resp = s3.client().list_objects_v2(Bucket="ckpt", Prefix=f"run/{PREFIX}/")
    return [o["Key"] for o in resp.get("Contents", [])]


def s3_tensors(step: int, dst: Path) -> dict[str, torch.Tensor]:
    """Tensors of the verified S3 checkpoint at ``step`` (copied to ``dst`` first)."""
    store = S3Store(CKPT)
    assert validate_checkpoint(store, step, True) == ""
    folder = step_dir_name(step)
    for key in store.blobs.list(folder):
        (dst / folder / key).parent.mkdir(parents=True, exist_ok=True)
        store.blobs.download(f"{folder}/{key}", dst / folder / key)
    return load_checkpoint_tensors(dst / folder)


def test_hang_after_the_start_record_then_sigterm_exits_143_within_the_window(
    moto_s3: MotoServer, proxy: HoldProxy, shards_dir: Path, work_dir: Path, reference: Path
) -> None:
    """A hung end-record write is abandoned after its timeout, so SIGTERM exits 143 inside the window."""
    d = work_dir / "run"
    ov = run_overrides(d, shards_dir, train__steps=REF_STEPS, checkpoint__interval=1000, checkpoint__uri=CKPT)
    env = {"AWS_ENDPOINT_URL": proxy.endpoint}
    log1 = work_dir / "launch1.log"
    proc = start_job(2, [*ov, "train.step_delay_s=0.3"], env=env, log=log1)
    try:
        wait_for(lambda: stored_records(moto_s3), 90, "the start record")
        proxy.hold(f"/{PREFIX}/")  # the record store hangs; checkpoints still pass
        wait_for(lambda: max(logged_steps(d), default=0) >= 4, 90, "step 4")
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=120)
        took = time.monotonic() - t0
    finally:
        stop_process_group(proc)
    out = log1.read_text()
    assert rc == exitcodes.PREEMPTED, out[-3000:]
    window = load_config(DEBUG_CONFIG, ov).checkpoint.shutdown_window_s
    assert took < window, f"{took:.1f}s from SIGTERM to exit, window {window}s"
    assert "Traceback" not in out
    [line] = [ln for ln in out.splitlines() if ABANDONED in ln]
    assert "(finished)" in line and "checkpoint.side_write_timeout_s" in line
    assert any(f"/{PREFIX}/" in r for r in proxy.held)  # the end record's PUT really was held
    [pre0] = read_events(d / "log_rank0.jsonl", "preempted")
    [pre1] = read_events(d / "log_rank1.jsonl", "preempted")
    s = pre0["step"]
    assert pre1["step"] == s and pre0["committed"] == s and 4 <= s < REF_STEPS

    proxy.pass_through()
    ok(run_job(2, ov, env=env))
    assert read_events(d / "log_rank0.jsonl", "start")[-1]["resumed_from"] == s
    assert logged_steps(d)[s:] == list(range(s + 1, REF_STEPS + 1))
    assert_bitwise_equal(s3_tensors(REF_STEPS, work_dir / "got"), final_tensors(reference, REF_STEPS))


def test_records_hang_from_the_start_training_runs_and_exits_0(
    moto_s3: MotoServer, proxy: HoldProxy, shards_dir: Path, work_dir: Path
) -> None:
    """A hung start-record write does not hold rank 0 back, so rank 1 is not left waiting in a collective."""
    d = work_dir / "run"
    proxy.hold(f"/{PREFIX}/")
    ov = run_overrides(
        d, shards_dir, train__steps=4, checkpoint__uri=CKPT, checkpoint__side_write_timeout_s=3
    )
    r = run_job(2, ov, env={"AWS_ENDPOINT_URL": proxy.endpoint}, timeout=240)
    ok(r)
    assert logged_steps(d) == [1, 2, 3, 4] and logged_steps(d, 1) == [1, 2, 3, 4]
    lines = [ln for ln in r.stderr.splitlines() if ABANDONED in ln]
    assert len(lines) == 2 and "(running)" in lines[0] and "(finished)" in lines[1], lines
    assert "Traceback" not in r.stderr
    assert stored_records(moto_s3) == []  # nothing got through: every record write was held
    assert validate_checkpoint(S3Store(CKPT), 4, True) == ""


def test_dataset_index_that_hangs_at_start_exits_4_after_store_wait_with_one_line(
    moto_s3: MotoServer, proxy: HoldProxy, shards_dir: Path, work_dir: Path
) -> None:
    """``data.store_wait_s`` bounds the whole wait, not each of boto3's attempts (60 s read timeout each)."""
    moto_s3.client().create_bucket(Bucket="data")
    upload(shards_dir, "s3://data/shards")
    proxy.hold()
    wait_s = 3
    ov = run_overrides(work_dir / "run", "s3://data/shards", data__store_wait_s=wait_s)
    t0 = time.monotonic()
    r = run_job(2, ov, env={"AWS_ENDPOINT_URL": proxy.endpoint}, timeout=240)
    took = time.monotonic() - t0
    assert r.returncode == exitcodes.STORE_UNAVAILABLE, r.stderr[-3000:]
    assert "Traceback" not in r.stderr
    [line] = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert "data.source=s3://data/shards" in line and f"unreachable for {wait_s}s" in line, line
    assert "data.store_wait_s" in line, line
    assert any("/index.json" in h for h in proxy.held)
    # The bound is the setting, not the client's read timeout (60 s a try): generous for a loaded machine.
    assert wait_s <= took < 45, took


# ------------------------------------------------------------------------------ the writer in-process
def test_side_writer_abandons_a_write_that_does_not_return_and_never_starts_it_late(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    ran: list[str] = []

    def hangs() -> None:  # a request the store holds until the test lets it go
        release.wait(60)
        ran.append("one")

    w = SideWriter(timeout_s=0.5)
    first = w.submit("write one", hangs)
    second = w.submit("write two", lambda: ran.append("two"))
    with caplog.at_level(logging.WARNING, logger="trainer.checkpoint.sidewrites"):
        abandoned = w.close()
    assert abandoned == [first, second]
    msgs = [r.getMessage() for r in caplog.records if r.name == "trainer.checkpoint.sidewrites"]
    assert [m.split(":")[0] for m in msgs] == ["abandoned write one", "abandoned write two"]
    release.set()  # the store answers after all: the first returns, the second is not started any more
    assert first.done.wait(60) and second.done.wait(60)
    assert ran == ["one"] and not second.ok


def test_side_writer_logs_a_refused_write_and_runs_the_next(caplog: pytest.LogCaptureFixture) -> None:
    done: list[Any] = []

    def refused() -> None:
        raise PermissionError("AccessDenied")

    w = SideWriter(timeout_s=30)
    with caplog.at_level(logging.WARNING, logger="trainer.checkpoint.sidewrites"):
        a = w.submit("the run record x", refused)
        b = w.submit("the run record y", lambda: done.append(1))
        assert w.close() == []
    assert not a.ok and b.ok and done == [1]
    msgs = [r.getMessage() for r in caplog.records if r.name == "trainer.checkpoint.sidewrites"]
    assert msgs == ["could not write the run record x: AccessDenied"]
