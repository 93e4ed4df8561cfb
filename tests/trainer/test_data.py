"""Shard tool, memmap reader, deterministic global sampler, prefetching loader and S3 fetch."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.trainer._support import make_corpus
from trainer.errors import BadInput
from trainer.tools import make_shards
from trainer.tools.make_shards import EOT, decode, encode, upload, write_shards
from trainer.tools.moto_server import MotoServer
from trainer.training.data import GlobalSampler, TokenLoader, TokenShards, fetch_shards


def test_encode_decode_roundtrip_with_eot() -> None:
    text = "héllo wörld\n\nsecond doc"
    toks = encode(text)
    assert toks.dtype == np.uint16 and int((toks == EOT).sum()) == 2
    assert decode(toks).strip() == text


def test_make_shards_cli_writes_index_with_checksums(work_dir: Path) -> None:
    src = work_dir / "in.txt"
    src.write_text(make_corpus(50))
    assert make_shards.main([str(src), str(work_dir / "out"), "--shard-tokens", "5000"]) == 0
    index = json.loads((work_dir / "out/index.json").read_text())
    total = len(encode(src.read_text()))
    assert index["total_tokens"] == total
    assert sum(s["tokens"] for s in index["shards"]) == total
    assert len(index["shards"]) == -(-total // 5000)
    on_disk = np.concatenate(
        [np.fromfile(work_dir / "out" / s["file"], dtype="<u2") for s in index["shards"]]
    )
    assert np.array_equal(on_disk, encode(src.read_text()))


def test_make_shards_cli_errors(work_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert make_shards.main([str(work_dir / "missing.txt"), str(work_dir / "o")]) == 2
    (work_dir / "empty.txt").write_text("\n\n")
    assert make_shards.main([str(work_dir / "empty.txt"), str(work_dir / "o")]) == 2
    assert "holds no text" in capsys.readouterr().err


def test_samples_come_from_one_shard(shards_dir: Path) -> None:
    ds = TokenShards(shards_dir, seq_len=32)
    index = json.loads((shards_dir / "index.json").read_text())
    assert ds.num_samples == sum((s["tokens"] - 1) // 32 for s in index["shards"])
    first = np.fromfile(shards_dir / index["shards"][0]["file"], dtype="<u2")
    per0 = (index["shards"][0]["tokens"] - 1) // 32
    assert np.array_equal(ds.sample(3), first[96:129])
    second = np.fromfile(shards_dir / index["shards"][1]["file"], dtype="<u2")
    assert np.array_equal(ds.sample(per0), second[:33])  # first sample of shard 1 starts at its token 0


def test_sampler_is_deterministic_and_covers_each_epoch_once() -> None:
    a, b = GlobalSampler(100, seed=7), GlobalSampler(100, seed=7)
    assert np.array_equal(a.ids(0, 250), b.ids(0, 250))
    assert not np.array_equal(a.ids(0, 100), GlobalSampler(100, seed=8).ids(0, 100))
    ep0, ep1 = a.ids(0, 100), a.ids(100, 100)
    assert sorted(ep0.tolist()) == list(range(100)) == sorted(ep1.tolist())
    assert not np.array_equal(ep0, ep1)  # reshuffled per epoch
    assert np.array_equal(a.ids(95, 10), np.concatenate([ep0[95:], ep1[:5]]))


def test_ranks_split_the_global_batch_like_one_process() -> None:
    s = GlobalSampler(1000, seed=1)
    whole = s.rank_ids(40, micro_batch=16, grad_accum=1, rank=0, world=1).ravel()
    parts = [s.rank_ids(40, micro_batch=4, grad_accum=2, rank=r, world=2).ravel() for r in range(2)]
    assert np.array_equal(np.concatenate(parts), whole)


def test_resume_with_other_world_size_continues_at_global_offset(shards_dir: Path) -> None:
    """2 ranks x 3 steps, then 1 rank with double micro-batch: the same samples as 1 rank throughout."""
    ds = TokenShards(shards_dir, seq_len=32)

    def loader(rank: int, world: int, mb: int, offset: int = 0) -> TokenLoader:
        return TokenLoader(
            ds,
            GlobalSampler(ds.num_samples, 3),
            micro_batch=mb,
            grad_accum=1,
            rank=rank,
            world=world,
            device=torch.device("cpu"),
            offset=offset,
        )

    two = [loader(r, 2, 4) for r in range(2)]
    seen = []
    for _ in range(3):
        seen.append(torch.cat([ld.next().micro[0][0] for ld in two]))
    state = two[0].state_dict()
    assert state == {"global_offset": 24} == two[1].state_dict()
    for ld in two:
        ld.close()
    one = loader(0, 1, 8)
    one.load_state_dict(state)
    for _ in range(2):
        seen.append(one.next().micro[0][0])
    one.close()
    ref = loader(0, 1, 8)
    expected = [ref.next().micro[0][0] for _ in range(5)]
    ref.close()
    for got, exp in zip(seen, expected, strict=True):
        assert torch.equal(got, exp)


def test_loader_targets_are_shifted_inputs(shards_dir: Path) -> None:
    ds = TokenShards(shards_dir, seq_len=32)
    ld = TokenLoader(
        ds,
        GlobalSampler(ds.num_samples, 0),
        micro_batch=2,
        grad_accum=3,
        rank=1,
        world=2,
        device=torch.device("cpu"),
    )
    b = ld.next()
    ld.close()
    assert len(b.micro) == 3 and b.tokens == 2 * 3 * 2 * 32 and b.offset_after == 12
    x, y = b.micro[0]
    assert x.shape == (2, 32) and torch.equal(x[:, 1:], y[:, :-1])


def test_fetch_shards_from_s3_and_reject_bad_checksum(
    moto_s3: MotoServer, shards_dir: Path, work_dir: Path
) -> None:
    moto_s3.client().create_bucket(Bucket="data-bucket")
    upload(shards_dir, "s3://data-bucket/corpus/v1")
    local = fetch_shards("s3://data-bucket/corpus/v1", work_dir / "cache")
    assert local == work_dir / "cache/data-bucket/corpus/v1"
    for f in shards_dir.iterdir():
        assert (local / f.name).read_bytes() == f.read_bytes()
    assert TokenShards(local, 32).num_samples == TokenShards(shards_dir, 32).num_samples

    # A shard whose bytes do not match index.json is refused, and nothing partial is left as a shard.
    bad = write_shards(encode(make_corpus(20, seed=5)), work_dir / "bad", shard_tokens=10_000)
    (work_dir / "bad" / bad["shards"][0]["file"]).write_bytes(b"\0\0" * bad["shards"][0]["tokens"])
    upload(work_dir / "bad", "s3://data-bucket/corpus/bad")
    with pytest.raises(BadInput, match="sha256 does not match"):
        fetch_shards("s3://data-bucket/corpus/bad", work_dir / "cache2")
    assert not (work_dir / "cache2/data-bucket/corpus/bad/index.json").exists()
    assert not (work_dir / "cache2/data-bucket/corpus/bad" / bad["shards"][0]["file"]).exists()


def test_fetch_local_source_requires_index(work_dir: Path) -> None:
    with pytest.raises(BadInput, match=r"data.source=.*: no index.json; write the shards with .*make_shards"):
        fetch_shards(str(work_dir), work_dir / "cache")
