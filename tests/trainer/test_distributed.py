"""Two ranks under the launcher on CPU (gloo): DDP equivalence, gradient accumulation, restarts, SIGTERM."""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from tests.trainer._support import (
    REF_INTERVAL,
    REF_STEPS,
    assert_bitwise_equal,
    final_tensors,
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
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.config import ModelConfig
from trainer.training.loop import Trainer
from trainer.training.model import GPT

# processes and servers: left out of `make test-fast`
pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def model_only(t: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in t.items() if k.startswith("model.")}


def test_ddp_two_ranks_match_one_process_and_accumulation_matches_big_batch(
    work_dir: Path, shards_dir: Path, make_trainer: Callable[..., Trainer]
) -> None:
    steps = 4
    runs = {
        "ddp2": (2, 4, 1),  # world 2 x micro 4
        "single": (1, 8, 1),  # world 1 x micro 8: the same global batch of 8
        "accum": (2, 1, 4),  # world 2 x 4 micro-batches of 1 (no_sync on the first 3)
    }
    out = {}
    for name, (nproc, mb, acc) in runs.items():
        d = work_dir / name
        kv = dict(
            train__steps=steps, train__micro_batch=mb, train__grad_accum=acc, checkpoint__interval=steps
        )
        if nproc == 1:  # one rank: the same Trainer in this process (saves starting a launcher)
            assert make_trainer(d, **kv).run() == exitcodes.OK
        else:
            ok(run_job(nproc, run_overrides(d, shards_dir, **kv)))
        starts = read_events(d / "log_rank0.jsonl", "step")
        assert [e["global_offset"] for e in starts] == [8 * i for i in range(1, steps + 1)]
        out[name] = model_only(final_tensors(d, steps))
    torch.manual_seed(1234)  # the trainer's seed: same initial weights
    init = {f"model.{k}": v for k, v in GPT(ModelConfig()).state_dict().items()}
    moved = max((out["single"][k] - init[k]).abs().max().item() for k in init if k in out["single"])
    assert moved > 1e-4, "training did not change the parameters"
    for other in ("ddp2", "accum"):
        for k, v in out["single"].items():
            torch.testing.assert_close(out[other][k], v, rtol=1e-4, atol=2e-6, msg=f"{other}: {k}")


def test_killed_rank_restarts_from_checkpoint_bitwise_equal(
    work_dir: Path, shards_dir: Path, reference: Path
) -> None:
    d = work_dir / "killed"
    proc = start_job(
        2,
        run_overrides(
            d, shards_dir, train__steps=REF_STEPS, checkpoint__interval=REF_INTERVAL, train__step_delay_s=0.3
        ),
        extra=["--max-restarts=2"],
        log=work_dir / "torchrun.log",
    )
    try:
        wait_for(lambda: max(logged_steps(d, 1), default=0) >= 5, 90, "rank 1 to reach step 5")
        pid = read_events(d / "log_rank1.jsonl", "start")[-1]["pid"]
        os.kill(pid, signal.SIGKILL)  # a rank dies mid-run (OOM kill, hardware fault)
        rc = proc.wait(timeout=150)
    finally:
        stop_process_group(proc)
    assert rc == 0, (work_dir / "torchrun.log").read_text()[-5000:]
    starts = read_events(d / "log_rank0.jsonl", "start")
    assert [s["restart_count"] for s in starts] == [0, 1]
    assert starts[1]["resumed_from"] is not None and starts[1]["resumed_from"] >= REF_INTERVAL
    steps = logged_steps(d)
    assert steps[-1] == REF_STEPS and set(steps) == set(range(1, REF_STEPS + 1))
    assert_bitwise_equal(final_tensors(d, REF_STEPS), final_tensors(reference, REF_STEPS))


def test_sigterm_checkpoints_and_restart_continues_without_gaps(
    work_dir: Path, shards_dir: Path, reference: Path
) -> None:
    d = work_dir / "sigterm"
    # Interval larger than the run: the only mid-run checkpoint is the one SIGTERM triggers.
    ov = run_overrides(d, shards_dir, train__steps=REF_STEPS, checkpoint__interval=1000)
    proc = start_job(2, [*ov, "train.step_delay_s=0.3"], log=work_dir / "launch1.log")
    try:
        wait_for(lambda: max(logged_steps(d), default=0) >= 4, 90, "step 4")
        proc.send_signal(signal.SIGTERM)  # what the kubelet does to the container's PID 1 (the launcher)
        rc = proc.wait(timeout=60)
    finally:
        stop_process_group(proc)
    log1 = (work_dir / "launch1.log").read_text()
    # The pod shows 143 only after a committed checkpoint (torchrun itself exited 1 with a traceback).
    assert rc == exitcodes.PREEMPTED, log1[-3000:]
    assert "Traceback" not in log1
    [pre0] = read_events(d / "log_rank0.jsonl", "preempted")
    [pre1] = read_events(d / "log_rank1.jsonl", "preempted")
    s = pre0["step"]
    assert pre1["step"] == s and pre0["committed"] == s, log1[-3000:]  # both ranks stopped at the same step
    assert 4 <= s < REF_STEPS
    assert LocalStore(str(d / "ckpt")).list_steps() == [s]
    first = logged_steps(d)
    assert first == list(range(1, s + 1))

    ok(run_job(2, ov))
    starts = read_events(d / "log_rank0.jsonl", "start")
    assert starts[-1]["resumed_from"] == s
    second = logged_steps(d)[len(first) :]
    assert second == list(range(s + 1, REF_STEPS + 1))  # nothing repeated, nothing skipped
    assert_bitwise_equal(final_tensors(d, REF_STEPS), final_tensors(reference, REF_STEPS))
    # One end record per attempt, written by rank 0: the preempted one, then the one that finished.
    recs = sorted(
        (json.loads(p.read_text()) for p in (d / "ckpt" / "run-records").glob("*.end.json")),
        key=lambda r: r["started_utc"] + r["attempt"],
    )
    assert [(r["exit"]["code"], r["steps"]["last"], r["world_size"]) for r in recs] == [
        (143, s, 2),
        (0, REF_STEPS, 2),
    ]
    assert recs[1]["steps"]["resumed_from"] == s and len(recs[0]["nodes"]) == 1
    assert [r["resources"]["nodes"] for r in recs] == [1, 1]  # two local ranks on one node


def test_corrupt_newest_checkpoint_is_skipped_on_resume(
    work_dir: Path, shards_dir: Path, reference: Path
) -> None:
    d = work_dir / "corrupt"
    shutil.copytree(reference / "ckpt", d / "ckpt")
    newest = d / "ckpt" / step_dir_name(REF_STEPS)
    victim = sorted(newest.glob("*/*.distcp"))[-1]  # in the attempt folder the manifest names
    raw = bytearray(victim.read_bytes())
    raw[len(raw) // 3] ^= 0x01  # one flipped bit, same size
    victim.write_bytes(bytes(raw))
    r = run_job(2, run_overrides(d, shards_dir, train__steps=REF_STEPS, checkpoint__interval=REF_INTERVAL))
    ok(r)
    assert "skipping checkpoint" in r.stderr and "sha256 mismatch" in r.stderr
    # Both ranks hash a share of the files, so neither waits while the other verifies every byte.
    for rank in (0, 1):
        start = read_events(d / f"log_rank{rank}.jsonl", "start")[-1]
        assert start["verified_files"] >= 1 and start["verified_bytes"] > 0, start
    assert read_events(d / "log_rank0.jsonl", "start")[-1]["resumed_from"] == REF_STEPS - REF_INTERVAL
    assert logged_steps(d) == list(range(REF_STEPS - REF_INTERVAL + 1, REF_STEPS + 1))
    # Retrained from the previous checkpoint, the result is the reference bit for bit.
    assert_bitwise_equal(final_tensors(d, REF_STEPS), final_tensors(reference, REF_STEPS))


def test_resume_with_other_world_size(work_dir: Path, shards_dir: Path, reference: Path) -> None:
    """A 2-rank checkpoint resumed by 1 rank with the same global batch (16) continues at the same global
    sample offset and ends close to a 2-rank resume (reduction order differs, so not bitwise)."""
    results = {}
    for name, nproc, mb in (("w1", 1, 8), ("w2", 2, 4)):
        d = work_dir / name
        (d / "ckpt").mkdir(parents=True)
        start = REF_STEPS - REF_INTERVAL
        shutil.copytree(reference / "ckpt" / step_dir_name(start), d / "ckpt" / step_dir_name(start))
        ok(
            run_job(
                nproc,
                run_overrides(
                    d,
                    shards_dir,
                    train__steps=REF_STEPS,
                    train__micro_batch=mb,
                    checkpoint__interval=REF_INTERVAL,
                ),
            )
        )
        [st] = read_events(d / "log_rank0.jsonl", "start")
        assert st["resumed_from"] == start and st["global_offset"] == start * 16 and st["world_size"] == nproc
        results[name] = model_only(final_tensors(d, REF_STEPS))
    assert_bitwise_equal(results["w2"], model_only(final_tensors(reference, REF_STEPS)))
    for k, v in results["w2"].items():
        torch.testing.assert_close(results["w1"][k], v, rtol=1e-4, atol=2e-6)
