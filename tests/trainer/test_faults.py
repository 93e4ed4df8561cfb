"""Faults in one process (world of one, gloo): every fault ends in a clear, bounded state (docs/trainer.md).

The launcher's side (exit codes a pod shows, SIGTERM, checks before workers start) is in test_launch.py.
"""

from __future__ import annotations

import datetime
import json
import logging
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer._support import Job, make_corpus, read_events
from trainer import exitcodes
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.errors import BadInput, StoreUnavailable
from trainer.storage.hashing import MANIFEST
from trainer.tools.make_shards import encode, upload, write_shards
from trainer.tools.moto_server import MotoServer
from trainer.training.distributed import DistInfo
from trainer.training.loop import Trainer

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


def skip_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("skipping checkpoint")]


def manifest_path(root: Path, step: int) -> Path:
    return root / step_dir_name(step) / MANIFEST


def two_checkpoints(info: DistInfo, root: Path) -> dict[str, torch.Tensor]:
    """Checkpoints at steps 1 and 2; returns the parameters at step 1."""
    job = Job(0)
    ck = job.ckpt(str(root), info, keep=5, async_save=False)
    job.step()
    ck.save(1, blocking=True)
    want = job.params()
    job.step()
    ck.save(2, blocking=True)
    ck.close()
    return want


# -------------------------------------------------------------------- a manifest with wrong value types
def _entry(m: dict) -> str:
    return next(n for n in m["files"] if n.endswith(".distcp"))


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda m: [m], "must be a JSON object"),
        (lambda m: {**m, "files": list(m["files"])}, "files must be an object"),
        (lambda m: {**m, "files": {**m["files"], _entry(m): "abc"}}, "must be an object {size, sha256}"),
        (
            lambda m: {**m, "files": {**m["files"], _entry(m): {"size": "1", "sha256": "0" * 64}}},
            "byte count",
        ),
        (lambda m: {**m, "files": {**m["files"], _entry(m): {"size": 1, "sha256": 5}}}, "64 hex digits"),
        (lambda m: {**m, "step": "2"}, "step must be an integer"),
        (lambda m: {k: v for k, v in m.items() if k != "files"}, "files must be an object"),
        (lambda m: {**m, "config": "x"}, "config must be an object"),
    ],
    ids=["list", "files-list", "entry-str", "size-str", "sha-int", "step-str", "no-files", "config-str"],
)
def test_manifest_with_wrong_types_is_skipped_with_its_reason(
    info: DistInfo, work_dir: Path, caplog: pytest.LogCaptureFixture, damage: Callable, reason: str
) -> None:
    """A malformed manifest is a skipped checkpoint, not a crash that torchrun would restart into."""
    want = two_checkpoints(info, work_dir)
    p = manifest_path(work_dir, 2)
    p.write_text(json.dumps(damage(json.loads(p.read_text()))))
    other = Job(3)
    ck = other.ckpt(str(work_dir), info)
    with caplog.at_level(logging.WARNING):
        assert ck.find_latest_valid() == 1
    [line] = skip_warnings(caplog)
    assert step_dir_name(2) in line and reason in line
    ck.load(1)
    assert all(torch.equal(v, other.params()[k]) for k, v in want.items())
    ck.close()


# ---------------------------------------------------------- a manifest naming an attempt folder that is gone
def test_missing_attempt_folder_is_named_in_the_skip_reason(
    info: DistInfo, work_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The reason names the missing attempt folder, not a file inside it."""
    two_checkpoints(info, work_dir)
    attempt = json.loads(manifest_path(work_dir, 2).read_text())["attempt"]
    shutil.rmtree(work_dir / step_dir_name(2) / attempt)
    ck = Job(3).ckpt(str(work_dir), info)
    with caplog.at_level(logging.WARNING):
        assert ck.find_latest_valid() == 1
    [line] = skip_warnings(caplog)
    assert step_dir_name(2) in line and f"attempt folder {attempt}/ is missing" in line, line
    ck.close()


# ------------------------------------------- a folder whose manifest and state disagree; keep counts verified
def test_folder_whose_state_is_another_step_is_skipped_and_takes_no_keep_slot(
    info: DistInfo, work_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A folder whose saved state is another step is never loaded, and pruning does not count it."""
    job = Job(0)
    ck = job.ckpt(str(work_dir), info, keep=2, async_save=False)
    for s in (1, 2, 3):
        job.step()
        assert ck.save(s, blocking=True).committed  # type: ignore[union-attr]
    want = job.params()
    ck.close()
    # A copy of step 2 presented as step 9: folder and manifest say 9, the saved state is step 2.
    shutil.copytree(work_dir / step_dir_name(2), work_dir / step_dir_name(9))
    m = json.loads(manifest_path(work_dir, 9).read_text())
    manifest_path(work_dir, 9).write_text(json.dumps({**m, "step": 9}))

    other = Job(1)
    ck2 = other.ckpt(str(work_dir), info, keep=2, async_save=False)
    with caplog.at_level(logging.WARNING):
        assert ck2.find_latest_valid() == 3
    [line] = skip_warnings(caplog)
    assert step_dir_name(9) in line and "saved state is step 2" in line
    assert ck2.load(3) == 3
    assert all(torch.equal(v, other.params()[k]) for k, v in want.items())
    other.step()
    assert ck2.save(4, blocking=True).committed  # type: ignore[union-attr]
    steps = LocalStore(str(work_dir)).list_steps()
    assert {3, 4} <= set(steps) and 2 not in steps, steps  # keep=2 counts 3 and 4, not the impostor
    ck2.close()


# ------------------------------------------------------------------ a stale attempt after the commit
def test_a_stale_attempt_cannot_replace_a_committed_checkpoint(info: DistInfo, work_dir: Path) -> None:
    """A leftover process of an earlier attempt cannot overwrite a committed step with its own state."""
    stale = Job(0)
    stale_ck = stale.ckpt(str(work_dir), info, async_save=False)  # attempt 1, still alive somewhere
    fresh = Job(1)
    fresh_ck = fresh.ckpt(str(work_dir), info, async_save=False)  # attempt 2 (after a restart)
    fresh.step(2)
    assert fresh_ck.save(2, blocking=True).committed  # type: ignore[union-attr]
    want = fresh.params()
    stale.step(2)
    res = stale_ck.save(2, blocking=True)
    assert res is not None and not res.committed and "already committed" in res.error
    reader = Job(5)
    ck = reader.ckpt(str(work_dir), info, verify_on_load=False)  # even a size-only check is safe now
    assert ck.find_latest_valid() == 2
    ck.load(2)
    assert all(torch.equal(v, reader.params()[k]) for k, v in want.items())
    for c in (stale_ck, fresh_ck, ck):
        c.close()


# ------------------------------------------------------------------------------------- S3 outages
def test_store_outage_at_the_first_save_is_a_failed_save_not_a_crash(
    info: DistInfo, moto_s3: MotoServer
) -> None:
    """Every store call of a save, listing leftover step folders included, goes through the failure
    handling, so on_save_failure=continue keeps training."""
    moto_s3.client().create_bucket(Bucket="ckpt")
    job = Job(0)
    ck = job.ckpt("s3://ckpt/run", info, s3_max_attempts=1, on_save_failure="continue")
    moto_s3.stop()
    job.step()
    t0 = time.monotonic()
    res = ck.save(1, blocking=True)
    assert res is not None and not res.committed and res.error
    assert time.monotonic() - t0 < 60
    moto_s3.start()
    job.step()
    res = ck.save(2, blocking=True)
    assert res is not None and res.committed, res.error
    ck.close()


def test_start_during_an_outage_retries_then_fails_with_one_line(info: DistInfo, moto_s3: MotoServer) -> None:
    """The store gets ``store_wait_s`` to come back; then one line and its own exit code, no traceback."""
    moto_s3.client().create_bucket(Bucket="ckpt")
    job = Job(0)
    ck = job.ckpt("s3://ckpt/run", info, s3_max_attempts=1, store_wait_s=2)
    moto_s3.stop()
    t0 = time.monotonic()
    with pytest.raises(StoreUnavailable) as exc:
        ck.find_latest_valid()
    took = time.monotonic() - t0
    assert 2 <= took < 30, took
    msg = str(exc.value)
    assert "\n" not in msg and "s3://ckpt/run" in msg and "unreachable for 2s" in msg
    assert exc.value.code == exitcodes.STORE_UNAVAILABLE
    ck.close()


# ----------------------------------------------------------------------------- the trainer in-process
def events(work_dir: Path, kind: str) -> list[dict[str, Any]]:
    return read_events(work_dir / "log_rank0.jsonl", kind)


def test_checkpoint_at_or_beyond_train_steps_means_the_run_is_done(
    make_trainer: Callable[..., Trainer], work_dir: Path
) -> None:
    """A restart that finds a checkpoint at or past ``train.steps`` exits 0 without training."""
    assert make_trainer(train__steps=6, checkpoint__interval=3).run() == exitcodes.OK
    n_steps = len(events(work_dir, "step"))
    t = make_trainer(train__steps=4, checkpoint__interval=3)
    assert t.run() == exitcodes.OK
    done = events(work_dir, "done")[-1]
    assert done["step"] == 6 and done["already_complete"] is True
    assert len(events(work_dir, "step")) == n_steps  # no step trained
    assert LocalStore(str(work_dir / "ckpt")).list_steps() == [3, 6]


def test_preemption_whose_save_fails_is_not_reported_as_143(
    make_trainer: Callable[..., Trainer], moto_s3: MotoServer, work_dir: Path
) -> None:
    """143 means a committed checkpoint; a failed save on SIGTERM has its own code."""
    moto_s3.client().create_bucket(Bucket="ckpt")
    t = make_trainer(
        train__steps=50,
        checkpoint__uri="s3://ckpt/run",
        checkpoint__interval=1000,
        checkpoint__s3_max_attempts=1,
    )
    step = t.train_step

    def train_step(micro: Any) -> Any:
        out = step(micro)
        if t.step == 1:  # (t.step counts completed steps; this is the second)
            moto_s3.stop()
            t.flags.request_stop()  # SIGTERM during an outage
        return out

    t.train_step = train_step  # type: ignore[method-assign]
    assert t.run() == exitcodes.PREEMPTED_SAVE_FAILED
    [pre] = events(work_dir, "preempted")
    assert pre["step"] == 2 and pre["committed"] is None


def test_checkpoint_group_gets_train_dist_timeout(make_trainer: Callable[..., Trainer]) -> None:
    """The checkpoint group times out with ``train.dist_timeout_s``, not torch's 30-minute default."""
    t = make_trainer(train__dist_timeout_s=7)
    backend = t.ckpt.pg._get_backend(torch.device("cpu"))  # type: ignore[union-attr]
    assert backend.options._timeout == datetime.timedelta(seconds=7)


def test_sigterm_during_a_save_of_this_step_saves_once(
    make_trainer: Callable[..., Trainer], work_dir: Path
) -> None:
    """SIGTERM while this step's save is in flight waits for that save and saves nothing more."""
    t = make_trainer(train__steps=20, checkpoint__interval=3)
    save = t.ckpt.save

    def save_then_sigterm(step: int, *a: Any, **kw: Any) -> Any:
        res = save(step, *a, **kw)
        if step == 3:
            t.flags.request_stop()  # SIGTERM lands while the save of step 3 is in flight
        return res

    t.ckpt.save = save_then_sigterm  # type: ignore[method-assign]
    assert t.run() == exitcodes.PREEMPTED
    assert [e["step"] for e in events(work_dir, "checkpoint")] == [3]
    [pre] = events(work_dir, "preempted")
    assert pre["step"] == 3 and pre["committed"] == 3
    assert LocalStore(str(work_dir / "ckpt")).list_steps() == [3]


def test_shutdown_window_warning_counts_what_a_sigterm_would_cost(
    make_trainer: Callable[..., Trainer], caplog: pytest.LogCaptureFixture
) -> None:
    """The warning counts the save in flight plus the save of the current step: what SIGTERM can cost."""
    t = make_trainer(
        train__steps=3,
        checkpoint__interval=1,
        checkpoint__shutdown_window_s=0.001,
        checkpoint__side_write_timeout_s=0.0005,  # must stay inside the window
    )
    with caplog.at_level(logging.WARNING):
        assert t.run() == exitcodes.OK
    lines = [r.getMessage() for r in caplog.records if "checkpoint.shutdown_window_s" in r.getMessage()]
    assert lines, [r.getMessage() for r in caplog.records]
    assert "finish the save in flight" in lines[0] and "then save the current step" in lines[0]


def test_changed_dataset_or_global_batch_is_refused_unless_allowed(
    make_trainer: Callable[..., Trainer], work_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The saved sample offset means nothing for another dataset or global batch, so resuming asks first."""
    assert make_trainer(train__steps=4, checkpoint__interval=2).run() == exitcodes.OK
    other = work_dir / "shards2"
    write_shards(encode(make_corpus(seed=9)), other, shard_tokens=30_000)
    with pytest.raises(BadInput, match=r"dataset changed.*checkpoint.allow_dataset_change=true"):
        make_trainer(train__steps=6, shards=other).run()
    with pytest.raises(BadInput, match=r"global batch 8 -> 16.*checkpoint.allow_batch_change=true"):
        make_trainer(train__steps=6, train__micro_batch=8).run()
    with caplog.at_level(logging.WARNING):
        t = make_trainer(train__steps=6, shards=other, checkpoint__allow_dataset_change="true")
        assert t.run() == exitcodes.OK
    assert any("resuming with a changed dataset" in r.getMessage() for r in caplog.records)
    assert events(work_dir, "start")[-1]["resumed_from"] == 4


def test_fetch_of_a_missing_s3_dataset_is_bad_input(
    moto_s3: MotoServer, work_dir: Path, shards_dir: Path
) -> None:
    """A missing dataset is a user error with its fix, not a botocore traceback."""
    from trainer.training.data import fetch_shards

    moto_s3.client().create_bucket(Bucket="data")
    with pytest.raises(BadInput, match=r"data.source=s3://data/none.*no index.json"):
        fetch_shards("s3://data/none", work_dir / "cache")
    with pytest.raises(BadInput, match=r"bucket 'nobucket' does not exist"):
        fetch_shards("s3://nobucket/x", work_dir / "cache")
    with pytest.raises(BadInput, match=r"data.source=.*no index.json.*make_shards"):
        fetch_shards(str(work_dir / "nothing"), work_dir / "cache")
    upload(shards_dir, "s3://data/ok")
    assert (fetch_shards("s3://data/ok", work_dir / "cache") / "index.json").is_file()


def test_sigterm_save_that_cannot_fit_the_window_is_skipped_and_said_so(
    make_trainer: Callable[..., Trainer], work_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After SIGTERM, a save expected to outlast the window (the last save's duration) is not started: the
    checkpoint of step 3 stays the newest, the exit code says the stop step was not saved."""
    t = make_trainer(
        train__steps=20,
        checkpoint__interval=3,
        checkpoint__shutdown_window_s=0.001,  # shorter than any save
        checkpoint__side_write_timeout_s=0.0005,  # must stay inside the window
    )
    step = t.train_step

    def train_step(micro: Any) -> Any:
        out = step(micro)
        if t.step == 3:  # (t.step counts completed steps; this is the fourth)
            t.flags.request_stop()
        return out

    t.train_step = train_step  # type: ignore[method-assign]
    with caplog.at_level(logging.WARNING):
        assert t.run() == exitcodes.PREEMPTED_SAVE_FAILED
    [pre] = events(work_dir, "preempted")
    assert pre["step"] == 4 and pre["committed"] == 3
    assert LocalStore(str(work_dir / "ckpt")).list_steps() == [3]
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("not saving step")]
    assert line.startswith("not saving step 4: the last save (step 3) took ")
    assert line.endswith("s of the preemption window are left; the next attempt resumes from step 3")
