"""Run records: rank 0 creates one at the start and one at the end of every attempt, each written once
(docs/trainer.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.trainer._support import read_events, wait_for
from trainer import exitcodes
from trainer.checkpoint.store import LocalStore
from trainer.errors import BlobExists
from trainer.run.runrecord import PREFIX, gpu_hours, record_key, resources
from trainer.storage.blobstore import open_blobs
from trainer.storage.hashing import MANIFEST, sha256_file
from trainer.tools.moto_server import MotoServer
from trainer.training.loop import Trainer

pytestmark = pytest.mark.slow  # processes and servers: left out of `make test-fast`


def records(ckpt: Path, event: str = "end") -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((ckpt / PREFIX).glob(f"*.{event}.json"))]


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
            seen.extend(wait_for(lambda: records(work_dir / "ckpt", "start"), 60, "the start record"))
        return step(micro)

    t.train_step = train_step  # type: ignore[method-assign]
    assert t.run() == exitcodes.OK
    assert t.finish_side_writes() == []  # nothing abandoned: the end record is written
    [during] = seen
    assert during["status"] == "running" and during["exit"] is None and during["ended_utc"] is None
    assert records(work_dir / "ckpt", "start") == [during]  # the start record stays as it was written
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
    folder = work_dir / "ckpt" / PREFIX
    assert Path(rec["artifacts"]["run_record"]) == folder / f"{t.ckpt.attempt}.end.json"
    assert Path(during["artifacts"]["run_record"]) == folder / f"{t.ckpt.attempt}.start.json"
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


def test_resources_count_nodes_times_gpus_times_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "8")  # torchrun: processes on this node, one per GPU
    res = resources(16, uses_gpus=True)
    assert res == {"nodes": 2, "gpus_per_node": 8, "wall_s": None, "gpu_hours": None}
    assert gpu_hours(res, 1800.0) == {"nodes": 2, "gpus_per_node": 8, "wall_s": 1800.0, "gpu_hours": 8.0}
    assert gpu_hours(resources(16, uses_gpus=False), 1800.0)["gpu_hours"] == 0.0  # CPU ranks hold no GPU


def test_records_on_s3_are_created_once_and_say_who_and_how_much(
    make_trainer: Callable[..., Trainer], moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real trainer on CPU against a moto S3: each record is a new object, sent with If-None-Match, so
    one already there (here a forged start record) is kept and the trainer's write refused; the end record
    carries the submitter from the pod's environment and the attempt's GPU hours."""
    moto_s3.client().create_bucket(Bucket="ckpt")
    monkeypatch.setenv("AIPLAT_SUBMITTED_BY", "arn:aws:sts::111122223333:assumed-role/ml-research/alice")
    t = make_trainer(train__steps=3, checkpoint__interval=3, checkpoint__uri="s3://ckpt/run1")
    store = open_blobs(f"s3://ckpt/run1/{PREFIX}")
    forged = b'{"status": "forged"}'
    store.write(record_key(t.ckpt.attempt, "start"), forged)
    assert t.run() == exitcodes.OK
    abandoned = t.finish_side_writes()
    assert abandoned == []
    assert store.read(record_key(t.ckpt.attempt, "start")) == forged  # create-only: not replaced
    keys = moto_s3.client().list_objects_v2(Bucket="ckpt", Prefix=f"run1/{PREFIX}/")["Contents"]
    assert sorted(k["Key"] for k in keys) == sorted(
        f"run1/{PREFIX}/{record_key(t.ckpt.attempt, e)}" for e in ("start", "end")
    )
    end = json.loads(store.read(record_key(t.ckpt.attempt, "end")))
    assert end["status"] == "finished" and end["exit"]["code"] == 0
    assert end["submitted_by"] == "arn:aws:sts::111122223333:assumed-role/ml-research/alice"
    res = end["resources"]
    assert (res["nodes"], res["gpus_per_node"], res["gpu_hours"]) == (1, 0, 0.0)  # one CPU rank
    assert 0 < res["wall_s"] < 600
    assert end["artifacts"]["run_record"] == f"s3://ckpt/run1/{PREFIX}/{record_key(t.ckpt.attempt, 'end')}"
    # the end record cannot be replaced either: a second create of the same key is refused by the store
    with pytest.raises(BlobExists):
        store.write(record_key(t.ckpt.attempt, "end"), b"{}", create_only=True)
