"""Checkpointer in one process (world of one, gloo): async staging, manifest, pruning, corruption."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from trainer.checkpoint import Checkpointer, validate_checkpoint
from trainer.config import CheckpointConfig, ModelConfig
from trainer.distributed import DistInfo, destroy_distributed, init_distributed
from trainer.model import GPT
from trainer.storage import LocalStore, step_dir_name


@pytest.fixture(scope="module")
def info() -> Iterator[DistInfo]:
    saved = {k: os.environ.get(k) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    yield init_distributed(60)
    destroy_distributed()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


class Pos:
    """Stand-in for the loader's position."""

    def __init__(self) -> None:
        self.offset = 0

    def state_dict(self) -> dict[str, int]:
        return {"global_offset": self.offset}

    def load_state_dict(self, s: dict[str, int]) -> None:
        self.offset = s["global_offset"]


class Job:
    """Model + optimizer + scheduler + position, stepped on a fixed batch."""

    def __init__(self, seed: int) -> None:
        torch.manual_seed(seed)
        self.model = GPT(ModelConfig())
        self.opt = torch.optim.AdamW(self.model.parameters(), lr=1e-3)
        self.sched = torch.optim.lr_scheduler.LambdaLR(self.opt, lambda s: 1.0 / (1 + s))
        self.pos = Pos()
        g = torch.Generator().manual_seed(0)
        self.x = torch.randint(0, 257, (2, 33), generator=g)

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.model(self.x[:, :-1], self.x[:, 1:]).backward()
            self.opt.step()
            self.opt.zero_grad()
            self.sched.step()
            self.pos.offset += 2

    def ckpt(self, uri: str, info: DistInfo, **kw: Any) -> Checkpointer:
        cfg = CheckpointConfig(uri=uri, **kw)
        return Checkpointer(cfg, info, self.model, self.opt, {"sched": self.sched, "data": self.pos})

    def params(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}


def test_async_save_is_isolated_from_later_updates(info: DistInfo, tmp_path: Path) -> None:
    job = Job(0)
    job.step(2)
    ck = job.ckpt(str(tmp_path), info, keep=5)
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
    ck2 = other.ckpt(str(tmp_path), info)
    assert ck2.find_latest_valid() == 2
    assert ck2.load(2) == 2
    after = other.params()
    for k in before:
        assert torch.equal(before[k], after[k]), k
    assert other.pos.offset == 4 and other.sched.last_epoch == 2
    assert int(other.opt.state_dict()["state"][0]["step"]) == 2
    ck.close()
    ck2.close()


def test_manifest_lists_every_file_with_checksum(info: DistInfo, tmp_path: Path) -> None:
    job = Job(0)
    job.step()
    ck = job.ckpt(str(tmp_path), info)
    res = ck.save(1, blocking=True)
    assert res is not None and res.committed
    d = tmp_path / step_dir_name(1)
    manifest = json.loads((d / "manifest.json").read_text())
    store = LocalStore(str(tmp_path))
    files = {p.name for p in d.iterdir()} - {"manifest.json"}
    assert set(manifest["files"]) == files and ".metadata" in files
    for name, meta in manifest["files"].items():
        assert meta["size"] == (d / name).stat().st_size
        assert meta["sha256"] == store.sha256(1, name)
    assert res.bytes == sum(m["size"] for m in manifest["files"].values())
    ck.close()


def test_keeps_newest_k_and_drops_partial_leftovers(info: DistInfo, tmp_path: Path) -> None:
    job = Job(0)
    ck = job.ckpt(str(tmp_path), info, keep=2, async_save=False)
    (tmp_path / step_dir_name(1)).mkdir()  # leftover of a failed save: no manifest
    (tmp_path / step_dir_name(1) / "__0_0.distcp").write_bytes(b"partial")
    for s in range(2, 6):
        job.step()
        assert ck.save(s, blocking=True).committed  # type: ignore[union-attr]
    assert LocalStore(str(tmp_path)).list_steps() == [4, 5]
    ck.close()


@pytest.mark.parametrize(
    "damage", ["flip_byte", "truncate", "drop_manifest", "drop_metadata", "bad_manifest"]
)
def test_corrupt_newest_is_skipped_and_previous_loads(info: DistInfo, tmp_path: Path, damage: str) -> None:
    job = Job(0)
    ck = job.ckpt(str(tmp_path), info, keep=3)
    job.step()
    ck.save(1, blocking=True)
    want = job.params()
    job.step()
    ck.save(2, blocking=True)
    ck.close()
    d = tmp_path / step_dir_name(2)
    data = d / "__0_0.distcp"
    if damage == "flip_byte":
        raw = bytearray(data.read_bytes())
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:-10])
    elif damage == "drop_manifest":
        (d / "manifest.json").unlink()
    elif damage == "drop_metadata":
        (d / ".metadata").unlink()
    else:
        (d / "manifest.json").write_text("{not json")
    assert validate_checkpoint(LocalStore(str(tmp_path)), 2, verify_hashes=True)

    other = Job(3)
    ck2 = other.ckpt(str(tmp_path), info)
    assert ck2.find_latest_valid() == 1
    ck2.load(1)
    got = other.params()
    assert all(torch.equal(want[k], got[k]) for k in want)
    ck2.close()


def test_no_checkpoint_means_fresh_start(info: DistInfo, tmp_path: Path) -> None:
    ck = Job(0).ckpt(str(tmp_path / "empty"), info)
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
    assert "runs/a/step_000000002/manifest.json" in keys and "runs/a/step_000000002/.metadata" in keys
    want = job.params()
    other = Job(5)
    ck2 = other.ckpt("s3://ckpt-bucket/runs/a", info)
    assert ck2.find_latest_valid() == 2
    ck2.load(2)
    got = other.params()
    assert all(torch.equal(want[k], got[k]) for k in want)
    ck.close()
    ck2.close()
