"""The model store (inference/store.py): newest valid release, standby load, swap, rollback pin, and what
a missing, partial, corrupt or unreachable release does (one log line, a counted failure, no swap)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch

from inference.config import ServerConfig
from inference.metrics import Metrics
from inference.store import ModelStore, resolve_device
from tests.inference.conftest import MODEL, Publisher, corrupt_release, version_dir
from trainer.hashing import MANIFEST
from trainer.release import CONFIG, WEIGHTS, load_model
from trainer.tools.moto_server import MotoServer


def make_store(root: Path | str, cache: Path, **kw: object) -> ModelStore:
    cfg = ServerConfig(release_root=str(root), model_name=MODEL, cache_dir=str(cache), **kw)  # type: ignore[arg-type]
    store = ModelStore(cfg, Metrics())
    store.check_cache_dir()
    return store


def failures(store: ModelStore, reason: str) -> float:
    return store.metrics.registry.get_sample_value("inference_model_load_failures_total", {"reason": reason})


def info(store: ModelStore) -> list[dict[str, str]]:
    """Label sets of inference_model_info with value 1."""
    return [
        s.labels
        for m in store.metrics.registry.collect()
        if m.name == "inference_model_info"
        for s in m.samples
        if s.value == 1
    ]


def test_nothing_published_yet_is_not_ready_with_a_reason(work: Path) -> None:
    store = make_store(work / "rel", work / "cache")
    assert store.poll_once() is False
    assert store.current is None
    assert store.problem == f"no release under {work / 'rel'}/release/{MODEL}/ yet (polling every 30s)"


def test_loads_newest_then_swaps_in_a_newer_one(checkpoints: Path, work: Path) -> None:
    pub = Publisher(checkpoints, work / "rel")
    v1 = pub(2)
    store = make_store(work / "rel", work / "cache")
    assert store.poll_once() is True
    cur = store.current
    assert cur is not None and cur.version == v1.version and cur.release.step == 2
    assert info(store) == [{"model_name": MODEL, "version": v1.version, "step": "2"}]
    # What is served is the published weights: same as loading the release's files directly.
    ref = load_model(version_dir(work / "rel", v1.version))
    for k, v in ref.state_dict().items():
        assert torch.equal(cur.model.state_dict()[k], v), k
    assert store.poll_once() is False  # nothing new: no reload
    assert store.current is cur

    v2 = pub(4)
    assert store.poll_once() is True
    assert store.current is not None and store.current.version == v2.version
    assert info(store) == [{"model_name": MODEL, "version": v2.version, "step": "4"}]
    assert store.metrics.registry.get_sample_value("inference_model_loads_total") == 2
    # Only the serving version stays in the cache directory.
    assert sorted(p.name for p in (work / "cache").iterdir()) == [v2.version]


def test_corrupt_newer_release_keeps_the_old_model_and_is_tried_once(
    checkpoints: Path, work: Path, caplog: pytest.LogCaptureFixture
) -> None:
    pub = Publisher(checkpoints, work / "rel")
    v1 = pub(2)
    store = make_store(work / "rel", work / "cache")
    store.poll_once()
    v2 = pub(4)
    corrupt_release(work / "rel", v2.version)
    with caplog.at_level(logging.WARNING, logger="inference.store"):
        assert store.poll_once() is False
        assert store.poll_once() is False  # same objects: not downloaded or counted again
    assert store.current is not None and store.current.version == v1.version
    assert failures(store, "invalid_release") == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "inference.store"]
    assert lines == [
        f"release {MODEL}/{v2.version} skipped: {WEIGHTS}: sha256 does not match {MANIFEST} (corrupt or "
        f"replaced); still serving {v1.version}"
    ]
    assert info(store) == [{"model_name": MODEL, "version": v1.version, "step": "2"}]

    # Re-published correctly (a newer version): served.
    v3 = pub(4)
    assert store.poll_once() is True and store.current.version == v3.version


def test_corrupt_only_release_is_not_ready_with_the_reason(checkpoints: Path, work: Path) -> None:
    v1 = Publisher(checkpoints, work / "rel")(2)
    corrupt_release(work / "rel", v1.version)
    store = make_store(work / "rel", work / "cache")
    store.poll_once()
    assert store.current is None
    assert store.problem.startswith(f"release {MODEL}/{v1.version} skipped: {WEIGHTS}: sha256 does not match")
    assert not list((work / "cache").iterdir())  # nothing half-downloaded left behind


def test_release_still_replicating_is_retried_when_its_objects_change(checkpoints: Path, work: Path) -> None:
    """Replication copies objects in any order: a manifest can be there before the weights."""
    pub = Publisher(checkpoints, work / "src")
    v1, v2 = pub(2), pub(4)
    replica = work / "replica"
    src1, dst1 = version_dir(work / "src", v1.version), version_dir(replica, v1.version)
    dst1.parent.mkdir(parents=True)
    import shutil

    shutil.copytree(src1, dst1)
    src2, dst2 = version_dir(work / "src", v2.version), version_dir(replica, v2.version)
    dst2.mkdir()
    shutil.copy(src2 / MANIFEST, dst2 / MANIFEST)
    shutil.copy(src2 / CONFIG, dst2 / CONFIG)
    store = make_store(replica, work / "cache")
    assert store.poll_once() is True  # v2 incomplete: falls back to v1
    assert store.current.version == v1.version
    assert failures(store, "invalid_release") == 1
    assert store.problem == (
        f"release {MODEL}/{v2.version} skipped: incomplete: {WEIGHTS} missing "
        "(replication not finished, or deleted)"
    )
    assert store.poll_once() is False and failures(store, "invalid_release") == 1
    shutil.copy(src2 / WEIGHTS, dst2 / WEIGHTS)  # replication catches up
    assert store.poll_once() is True and store.current.version == v2.version


def test_pin_rolls_back_to_an_older_version(checkpoints: Path, work: Path) -> None:
    pub = Publisher(checkpoints, work / "rel")
    v1, v2 = pub(2), pub(4)
    store = make_store(work / "rel", work / "cache")
    store.poll_once()
    assert store.current.version == v2.version
    pinned = make_store(work / "rel", work / "cache2", pin_version=v1.version)
    assert pinned.poll_once() is True and pinned.current.version == v1.version
    pub(4)  # newer releases do not move a pinned server
    assert pinned.poll_once() is False and pinned.current.version == v1.version


def test_pin_to_a_missing_version_is_a_counted_failure(checkpoints: Path, work: Path) -> None:
    Publisher(checkpoints, work / "rel")(2)
    store = make_store(work / "rel", work / "cache", pin_version="20200101T000000Z-step9")
    assert store.poll_once() is False and store.current is None
    assert failures(store, "pinned_missing") == 1
    assert (
        store.problem
        == f"INFERENCE_PIN_VERSION=20200101T000000Z-step9 is not under {work / 'rel'}/release/{MODEL}/"
    )


def test_release_with_another_tokenizer_is_refused(checkpoints: Path, work: Path) -> None:
    v1 = Publisher(checkpoints, work / "rel")(2)
    d = version_dir(work / "rel", v1.version)
    manifest = json.loads((d / MANIFEST).read_text())
    manifest["tokenizer"] = {"tokenizer": "gpt2-bpe", "vocab_size": 50257, "eot_token": 50256}
    (d / MANIFEST).write_text(json.dumps(manifest))
    store = make_store(work / "rel", work / "cache")
    store.poll_once()
    assert store.current is None
    assert store.problem.endswith("tokenizer 'gpt2-bpe' is not supported by this server (bytes only)")


def test_s3_outage_keeps_serving_and_is_not_a_bad_release(
    checkpoints: Path, work: Path, moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    moto_s3.client().create_bucket(Bucket="models")
    pub = Publisher(checkpoints, "s3://models")
    v1 = pub(2)
    store = make_store("s3://models", work / "cache")
    assert store.poll_once() is True and store.current.version == v1.version
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    moto_s3.stop()
    assert store.poll_once() is False
    assert store.current.version == v1.version
    assert failures(store, "store_unavailable") == 1
    assert failures(store, "invalid_release") == 0
    assert "did not answer" in store.problem
    moto_s3.start()
    v2 = pub(4)
    assert store.poll_once() is True and store.current.version == v2.version


def test_poller_thread_survives_an_unexpected_error(checkpoints: Path, work: Path) -> None:
    """Whatever goes wrong in a poll, the thread goes on polling (a counted load_error, no traceback)."""
    store = make_store(work / "rel", work / "cache", poll_interval_s=0.05)
    calls = []

    def broken() -> bool:
        calls.append(1)
        raise KeyError("boom")

    store.poll_once = broken  # type: ignore[method-assign]
    store.start()
    try:
        import time

        deadline = time.monotonic() + 10
        while len(calls) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        store.stop()
    assert len(calls) >= 3
    assert failures(store, "load_error") >= 3
    assert store.problem == "model poll failed: KeyError: 'boom'"


def test_bfloat16_model_generates(checkpoints: Path, work: Path) -> None:
    """The GPU default dtype (bfloat16), exercised on CPU: weights cast on load, warm-up finite, batched
    generation runs."""
    from inference.batcher import Batcher, Job

    v1 = Publisher(checkpoints, work / "rel")(2)
    store = make_store(work / "rel", work / "cache", dtype="bfloat16", device="cpu")
    assert store.poll_once() is True and store.current.version == v1.version
    assert {p.dtype for p in store.current.model.parameters()} == {torch.bfloat16}
    batcher = Batcher(lambda: store.current, store.cfg, store.metrics)
    jobs = [Job(store.current.tokenizer.encode(p), 5, 0.7, 10) for p in ("the", "a quick")]
    for j in jobs:
        batcher.submit(j)
    batcher.start()
    try:
        results = [j.future.result(30) for j in jobs]
    finally:
        batcher.stop()
    assert all(1 <= len(r.tokens) <= 5 and all(0 <= t < 256 for t in r.tokens) for r in results)


def test_weights_that_give_nan_are_refused_and_not_cached(checkpoints: Path, work: Path) -> None:
    """A release whose manifest matches its files but whose weights are NaN fails the warm-up step."""
    from safetensors.torch import load_file, save_file

    from trainer.hashing import sha256_file

    pub = Publisher(checkpoints, work / "rel")
    v1, v2 = pub(2), pub(4)
    d = version_dir(work / "rel", v2.version)
    tensors = load_file(d / WEIGHTS)
    tensors["ln_f.weight"] = torch.full_like(tensors["ln_f.weight"], float("nan"))
    save_file(tensors, str(d / WEIGHTS), metadata={"format": "pt"})
    manifest = json.loads((d / MANIFEST).read_text())
    manifest["files"][WEIGHTS] = {"size": (d / WEIGHTS).stat().st_size, "sha256": sha256_file(d / WEIGHTS)}
    (d / MANIFEST).write_text(json.dumps(manifest))
    store = make_store(work / "rel", work / "cache")
    assert store.poll_once() is True and store.current.version == v1.version  # fell back to v1
    assert failures(store, "invalid_release") == 1
    assert store.problem == (
        f"release {MODEL}/{v2.version} skipped: "
        "the weights give non-finite logits (NaN/inf) on a warm-up step"
    )
    assert sorted(p.name for p in (work / "cache").iterdir()) == [v1.version]


@pytest.mark.parametrize(
    ("capability", "expected"),
    [
        ((7, 0), torch.float16),  # V100
        ((7, 5), torch.float16),  # T4 (g4dn)
        ((8, 0), torch.bfloat16),  # A100 (p4d/p4de)
        ((8, 6), torch.bfloat16),  # A10G (g5)
        ((9, 0), torch.bfloat16),  # H100 (p5)
    ],
)
def test_auto_dtype_on_cuda_follows_the_compute_capability(
    monkeypatch: pytest.MonkeyPatch, capability: tuple[int, int], expected: torch.dtype
) -> None:
    """Review finding F11: bfloat16 only where the GPU has bfloat16 tensor cores (sm_80+), float16 below
    (the T4s the infer stacks' Karpenter pools include); an explicit dtype is kept as asked."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    for device in ("auto", "cuda"):
        assert resolve_device(device, "auto") == (torch.device("cuda"), expected)
    assert resolve_device("cuda", "bfloat16")[1] == torch.bfloat16
    assert resolve_device("cpu", "auto") == (torch.device("cpu"), torch.float32)


def test_auto_dtype_without_a_gpu_is_float32(monkeypatch: pytest.MonkeyPatch) -> None:
    """No GPU visible: cpu and float32, and the capability is never asked (it would raise without CUDA)."""

    def no_cuda(device: object = None) -> tuple[int, int]:
        raise AssertionError("capability asked without a GPU")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda)
    assert resolve_device("auto", "auto") == (torch.device("cpu"), torch.float32)
    with pytest.raises(ValueError, match="no GPU is visible"):
        resolve_device("cuda", "auto")
