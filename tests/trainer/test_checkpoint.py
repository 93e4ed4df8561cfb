"""Checkpointer in one process (world of one, gloo): async staging, manifest, pruning, corruption."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer._support import Job
from trainer.checkpoint import checkpointer as checkpoint
from trainer.checkpoint.checkpointer import validate_checkpoint
from trainer.checkpoint.store import LocalStore, step_dir_name
from trainer.storage.hashing import MANIFEST, sha256_file
from trainer.training.distributed import DistInfo


def test_async_save_is_isolated_from_later_updates(info: DistInfo, work_dir: Path) -> None:
    job = Job(0)
    job.step(2)
    ck = job.ckpt(str(work_dir), info, keep=5)
    before = job.params()
    ck.save(2)  # returns after staging
    job.step(3)  # keep training while the write runs
    with torch.no_grad():
        for p in job.model.parameters():
            p.add_(1.0)
    ck.wait()
    [res] = ck.drain()
    assert res.committed and res.step == 2 and res.bytes > 0
    assert res.blocked_s <= res.duration_s

    other = Job(1)
    ck2 = other.ckpt(str(work_dir), info)
    assert ck2.find_latest_valid() == 2
    assert ck2.load(2) == 2
    after = other.params()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert other.pos.offset == 4 and other.sched.last_epoch == 2
    assert int(other.opt.state_dict()["state"][0]["step"]) == 2
    ck.close()
    ck2.close()


def test_manifest_lists_every_file_with_checksum(info: DistInfo, work_dir: Path) -> None:
    job = Job(0)
    job.step()
    ck = job.ckpt(str(work_dir), info)
    res = ck.save(1, blocking=True)
    assert res is not None and res.committed
    step_dir = work_dir / step_dir_name(1)
    manifest = json.loads((step_dir / MANIFEST).read_text())
    # The manifest names this attempt's folder; DCP's files are there, nothing else is beside the manifest.
    assert manifest["attempt"] == ck.attempt and manifest["format"] == "trainer-ckpt-v2"
    assert sorted(p.name for p in step_dir.iterdir()) == sorted([MANIFEST, ck.attempt])
    d = step_dir / ck.attempt
    store = LocalStore(str(work_dir))
    files = {p.name for p in d.iterdir()}
    assert set(manifest["files"]) == files and ".metadata" in files
    for name, meta in manifest["files"].items():
        assert meta["size"] == (d / name).stat().st_size
        assert meta["sha256"] == store.sha256(1, name, ck.attempt) == sha256_file(d / name)
    assert res.bytes == sum(m["size"] for m in manifest["files"].values())
    ck.close()


def test_pruning_after_a_resume_does_not_check_the_resumed_checkpoint_again(
    info: DistInfo, work_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Discovery verified the checkpoint it resumed from; the first prune reads only older folders."""
    job = Job(0)
    ck = job.ckpt(str(work_dir), info, keep=5, async_save=False)
    for s in (1, 2):
        job.step()
        assert ck.save(s, blocking=True).committed  # type: ignore[union-attr]
    ck.close()
    other = Job(1)
    ck2 = other.ckpt(str(work_dir), info, keep=5, async_save=False)
    restored = ck2.restore()
    assert restored is not None and restored.manifest.step == 2
    inspected: list[int] = []
    real = checkpoint.inspect_checkpoint

    def counted(store: Any, step: int) -> Any:
        inspected.append(step)
        return real(store, step)

    monkeypatch.setattr(checkpoint, "inspect_checkpoint", counted)
    other.step()
    assert ck2.save(3, blocking=True).committed  # type: ignore[union-attr]
    assert inspected == [1]  # 2 was verified by the resume, 3 was just written
    assert LocalStore(str(work_dir)).list_steps() == [1, 2, 3]
    ck2.close()


def test_keeps_newest_k_and_drops_partial_leftovers(info: DistInfo, work_dir: Path) -> None:
    job = Job(0)
    ck = job.ckpt(str(work_dir), info, keep=2, async_save=False)
    (work_dir / step_dir_name(1)).mkdir()  # leftover of a failed save: no manifest
    (work_dir / step_dir_name(1) / "__0_0.distcp").write_bytes(b"partial")
    for s in range(2, 6):
        job.step()
        assert ck.save(s, blocking=True).committed  # type: ignore[union-attr]
    assert LocalStore(str(work_dir)).list_steps() == [4, 5]
    ck.close()


@pytest.mark.parametrize(
    "damage", ["flip_byte", "truncate", "drop_manifest", "drop_metadata", "bad_manifest"]
)
def test_corrupt_newest_is_skipped_and_previous_loads(info: DistInfo, work_dir: Path, damage: str) -> None:
    job = Job(0)
    ck = job.ckpt(str(work_dir), info, keep=3)
    job.step()
    ck.save(1, blocking=True)
    want = job.params()
    job.step()
    ck.save(2, blocking=True)
    ck.close()
    step_dir = work_dir / step_dir_name(2)
    d = step_dir / json.loads((step_dir / MANIFEST).read_text())["attempt"]
    data = d / "__0_0.distcp"
    if damage == "flip_byte":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:-10])
    elif damage == "drop_manifest":
        (step_dir / MANIFEST).unlink()
    elif damage == "drop_metadata":
        (d / ".metadata").unlink()
    else:
        (step_dir / MANIFEST).write_text("{not json")
    assert validate_checkpoint(LocalStore(str(work_dir)), 2, verify_hashes=True)

    other = Job(3)
    ck2 = other.ckpt(str(work_dir), info)
    assert ck2.find_latest_valid() == 1
    ck2.load(1)
    got = other.params()
    assert all(torch.equal(want[k], got[k]) for k in want)
    ck2.close()


def test_no_checkpoint_means_fresh_start(info: DistInfo, work_dir: Path) -> None:
    ck = Job(0).ckpt(str(work_dir / "empty"), info)
    assert ck.find_latest_valid() == -1
    ck.close()


def test_s3_roundtrip_through_connector(info: DistInfo, moto_s3: Any) -> None:
    moto_s3.client().create_bucket(Bucket="ckpt-bucket")
    job = Job(0)
    job.step(2)
    ck = job.ckpt("s3://ckpt-bucket/runs/a", info, s3_max_attempts=2)
    res = ck.save(2, blocking=True)
    assert res is not None and res.committed, res
    keys = {o["Key"] for o in moto_s3.client().list_objects_v2(Bucket="ckpt-bucket")["Contents"]}
    step_dir = "runs/a/step_000000002"
    assert keys == {
        f"{step_dir}/{MANIFEST}",
        f"{step_dir}/{ck.attempt}/.metadata",
        f"{step_dir}/{ck.attempt}/__0_0.distcp",
    }
    want = job.params()
    other = Job(5)
    ck2 = other.ckpt("s3://ckpt-bucket/runs/a", info)
    assert ck2.find_latest_valid() == 2
    ck2.load(2)
    got = other.params()
    assert all(torch.equal(want[k], got[k]) for k in want)
    ck.close()
    ck2.close()


def test_format_v1_checkpoint_still_loads(info: DistInfo, work_dir: Path) -> None:
    """Checkpoints written before attempt folders (format v1: DCP's files in the step folder) resume."""
    job = Job(0)
    ck = job.ckpt(str(work_dir), info, async_save=False)
    job.step(2)
    assert ck.save(2, blocking=True).committed  # type: ignore[union-attr]
    want = job.params()
    ck.close()
    step_dir = work_dir / step_dir_name(2)
    m = json.loads((step_dir / MANIFEST).read_text())
    for f in (step_dir / m["attempt"]).iterdir():
        f.rename(step_dir / f.name)
    (step_dir / m["attempt"]).rmdir()
    del m["attempt"]
    (step_dir / MANIFEST).write_text(json.dumps({**m, "format": "trainer-ckpt-v1"}))
    other = Job(1)
    ck2 = other.ckpt(str(work_dir), info)
    assert ck2.find_latest_valid() == 2
    assert ck2.load(2) == 2
    assert all(torch.equal(v, other.params()[k]) for k, v in want.items())
    ck2.close()
