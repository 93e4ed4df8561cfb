"""Run records: rank 0 writes one at the start and at the end of every attempt (docs/trainer.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.trainer._support import read_events, wait_for
from trainer import exitcodes
from trainer.checkpoint_store import LocalStore
from trainer.hashing import MANIFEST, sha256_file
from trainer.loop import Trainer
from trainer.runrecord import PREFIX

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


def records(ckpt: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((ckpt / PREFIX).glob("*.json"))]


def test_record_at_start_and_end(
    make_trainer: Callable[..., Trainer], work_dir: Path, shards_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIPLAT_IMAGE_DIGEST", "sha256:" + "ab" * 32)
    monkeypatch.setenv("NODE_NAME", "ip-10-0-1-23.ec2.internal")
    t = make_trainer(train__steps=4, checkpoint__interval=2)
    seen: list[dict[str, Any]] = []
    step = t.train_step

    def train_step(micro: Any) -> Any:
        if not seen:  # the first step: the start record was queued before it (written in the background)
            seen.extend(wait_for(lambda: records(work_dir / "ckpt"), 60, "the start record"))
        return step(micro)

    t.train_step = train_step  # type: ignore[method-assign]
    assert t.run() == exitcodes.OK
    assert t.finish_side_writes() == []  # nothing abandoned: the end record is written
    [during] = seen
    assert during["status"] == "running" and during["exit"] is None and during["ended_utc"] is None
    [rec] = records(work_dir / "ckpt")
    assert rec["attempt"] == t.ckpt.attempt and rec["started_utc"] == during["started_utc"]
    assert rec["status"] == "finished" and rec["exit"] == {"code": 0, "name": "ok", "reason": "ok"}
    assert rec["ended_utc"] >= rec["started_utc"]
    assert rec["config"] == t.cfg.to_dict()
    assert rec["image_digest"] == "sha256:" + "ab" * 32
    assert rec["world_size"] == 1 and rec["nodes"] == ["ip-10-0-1-23.ec2.internal"]
    assert rec["dataset"]["index_sha256"] == sha256_file(shards_dir / "index.json")
    assert rec["dataset"]["num_samples"] == t.shards.num_samples
    assert rec["steps"] == {"target": 4, "resumed_from": None, "last": 4}
    logged = read_events(work_dir / "log_rank0.jsonl", "step")[-1]
    assert rec["final_metrics"]["step"] == 4 and rec["final_metrics"]["loss"] == logged["loss"]
    store = LocalStore(str(work_dir / "ckpt"))
    committed = [
        s for s in store.list_steps() if (work_dir / "ckpt" / Path(store.uri(s)).name / MANIFEST).exists()
    ]
    assert (
        rec["checkpoints"]["committed"] == [store.uri(s) for s in committed] == [store.uri(2), store.uri(4)]
    )
    assert rec["checkpoints"]["latest"] == store.uri(4)
    assert Path(rec["artifacts"]["run_record"]) == work_dir / "ckpt" / PREFIX / f"{t.ckpt.attempt}.json"
    assert rec["artifacts"]["metrics_log"] == str(work_dir / "log_rank0.jsonl")


def test_each_attempt_has_its_record_with_its_exit(
    make_trainer: Callable[..., Trainer], work_dir: Path
) -> None:
    first = make_trainer(train__steps=10, checkpoint__interval=2)
    step = first.train_step

    def train_step(micro: Any) -> Any:
        out = step(micro)
        if first.step == 2:  # SIGTERM during the third step
            first.flags.request_stop()
        return out

    first.train_step = train_step  # type: ignore[method-assign]
    assert first.run() == exitcodes.PREEMPTED
    assert first.finish_side_writes() == []
    second = make_trainer(train__steps=10, checkpoint__interval=5)
    assert second.run() == exitcodes.OK
    assert second.finish_side_writes() == []
    by_attempt = {r["attempt"]: r for r in records(work_dir / "ckpt")}
    a, b = by_attempt[first.ckpt.attempt], by_attempt[second.ckpt.attempt]
    assert (a["exit"]["code"], a["exit"]["name"]) == (143, "preempted")
    assert "preempted at step 3" in a["exit"]["reason"]
    assert a["steps"] == {"target": 10, "resumed_from": None, "last": 3}
    assert b["steps"] == {"target": 10, "resumed_from": 3, "last": 10} and b["exit"]["code"] == 0
    assert b["checkpoints"]["committed"][-1].endswith("step_000000010")
