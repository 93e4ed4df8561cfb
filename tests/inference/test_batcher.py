"""The batcher (inference/batcher.py): concurrent requests share forward passes, join a running batch,
leave it when done or abandoned, never mix models across a swap, and get the same tokens as alone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from inference.batcher import Batcher, Job, Result, Unavailable
from inference.config import ServerConfig
from inference.metrics import Metrics
from inference.store import LoadedModel, ModelStore
from tests.inference.conftest import MODEL, Publisher


@pytest.fixture(scope="module")
def models(checkpoints: Path, inference_tmp: Path) -> tuple[LoadedModel, LoadedModel]:
    """The step-2 and step-4 releases of the session's training run, loaded by the store."""
    root = inference_tmp / "batcher-rel"
    pub = Publisher(checkpoints, root)
    v1, v2 = pub(2), pub(4)
    cfg = ServerConfig(
        release_root=str(root), model_name=MODEL, cache_dir=str(inference_tmp / "batcher-cache")
    )
    store = ModelStore(cfg, Metrics())
    store.check_cache_dir()
    return store.load(v1.version), store.load(v2.version)


class Harness:
    """A batcher over a model the test can swap."""

    def __init__(self, model: LoadedModel | None, **kw: object) -> None:
        self.model = model
        self.cfg = ServerConfig(release_root="/unused", model_name=MODEL, **kw)  # type: ignore[arg-type]
        self.metrics = Metrics()
        self.batcher = Batcher(lambda: self.model, self.cfg, self.metrics)

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        return self.metrics.registry.get_sample_value(name, labels or {}) or 0.0


@pytest.fixture()
def harness(models: tuple[LoadedModel, LoadedModel]) -> Iterator[Harness]:
    h = Harness(models[0], max_batch=8, max_wait_ms=50)
    yield h
    h.batcher.stop()


def job(model: LoadedModel, text: str, n: int, temperature: float = 0.0) -> Job:
    return Job(model.tokenizer.encode(text), n, temperature, 0)


def results(jobs: list[Job], timeout: float = 30) -> list[Result]:
    return [j.future.result(timeout) for j in jobs]


PROMPTS = ["the quick", "a", "lazy dog over", "spot nodes train", "", "fox", "data", "on"]


def test_concurrent_requests_share_forward_passes_and_match_alone(
    harness: Harness, models: tuple[LoadedModel, LoadedModel]
) -> None:
    m = models[0]
    jobs = [job(m, p, 6) for p in PROMPTS]
    for j in jobs:  # queued before the worker starts: all arrive "at once"
        harness.batcher.submit(j)
    harness.batcher.start()
    batched = results(jobs)
    # One prefill for all 8, then one forward per step for the rows still generating.
    assert harness.sample("inference_batch_size_count", {"phase": "prefill"}) == 1
    assert harness.sample("inference_batch_size_sum", {"phase": "prefill"}) == 8
    decode_steps = harness.sample("inference_batch_size_count", {"phase": "decode"})
    assert decode_steps <= 5  # 6 tokens need at most 5 decode forwards (the first comes from the prefill)
    # Exactly what each request gets alone (greedy), from a batcher that never batches.
    alone = Harness(m, max_batch=1, max_wait_ms=0)
    alone.batcher.start()
    try:
        single = []
        for p in PROMPTS:
            j = job(m, p, 6)
            alone.batcher.submit(j)
            single.append(j.future.result(30))
    finally:
        alone.batcher.stop()
    assert [r.tokens for r in batched] == [r.tokens for r in single]
    assert [r.finish_reason for r in batched] == [r.finish_reason for r in single]
    assert all(r.model is m for r in batched)
    generated = sum(len(r.tokens) for r in batched)
    assert harness.sample("inference_generated_tokens_total") == generated > 0
    assert harness.sample("inference_queue_depth") == 0


def test_a_new_request_joins_a_running_batch(
    harness: Harness, models: tuple[LoadedModel, LoadedModel]
) -> None:
    """No head-of-line blocking: a short request that arrives mid-generation finishes long before the
    long one, and both are in the same decode forwards for a while."""
    m = models[0]
    h = Harness(m, max_batch=8, max_wait_ms=0, debug_step_delay_ms=20)
    h.batcher.start()
    try:
        long = job(m, "the", 25)
        h.batcher.submit(long)
        deadline = time.monotonic() + 10
        while len(long.out) < 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        short = job(m, "fox", 3)
        h.batcher.submit(short)
        assert short.future.result(30).tokens and not long.future.done()
        assert len(long.future.result(30).tokens) == 25
    finally:
        h.batcher.stop()
    assert h.sample("inference_batch_size_count", {"phase": "prefill"}) == 2  # each joined on its own
    assert h.sample("inference_batch_size_bucket", {"phase": "decode", "le": "1.0"}) < h.sample(
        "inference_batch_size_count", {"phase": "decode"}
    )  # some decode steps carried both rows


def test_abandoned_request_leaves_the_batch(models: tuple[LoadedModel, LoadedModel]) -> None:
    m = models[0]
    h = Harness(m, max_batch=8, max_wait_ms=0, debug_step_delay_ms=20)
    a, b = job(m, "the", 20), job(m, "a", 20)
    h.batcher.submit(a)
    h.batcher.submit(b)
    h.batcher.start()
    try:
        deadline = time.monotonic() + 10
        while len(a.out) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        assert a.future.cancel()  # what a request timeout does
        assert len(b.future.result(30).tokens) == 20
    finally:
        h.batcher.stop()
    assert len(a.out) < 20  # it stopped generating for the abandoned row


def test_swap_never_mixes_models(models: tuple[LoadedModel, LoadedModel]) -> None:
    """A running batch finishes on its model; requests after the swap run on the new one."""
    old, new = models
    h = Harness(old, max_batch=8, max_wait_ms=0, debug_step_delay_ms=10)
    h.batcher.start()
    try:
        running = job(old, "the", 15)
        h.batcher.submit(running)
        deadline = time.monotonic() + 10
        while len(running.out) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        h.model = new  # the store's swap
        after = job(new, "fox", 3)
        h.batcher.submit(after)
        assert running.future.result(30).model is old
        assert after.future.result(30).model is new
    finally:
        h.batcher.stop()


def test_full_queue_and_shutdown_answer_unavailable(models: tuple[LoadedModel, LoadedModel]) -> None:
    m = models[0]
    h = Harness(m, max_queue=2)
    h.batcher.submit(job(m, "a", 2))
    h.batcher.submit(job(m, "b", 2))
    with pytest.raises(Unavailable, match="2 requests are already waiting"):
        h.batcher.submit(job(m, "c", 2))
    waiting = job(m, "d", 2)
    h2 = Harness(m)
    h2.batcher.submit(waiting)
    h2.batcher.stop()  # never started: the queued request is failed, not left hanging
    with pytest.raises(Unavailable, match="shut down before this request finished"):
        waiting.future.result(5)
    with pytest.raises(Unavailable, match="shutting down"):
        h2.batcher.submit(job(m, "e", 2))
    h.batcher.stop()


def test_no_model_loaded_fails_the_request(models: tuple[LoadedModel, LoadedModel]) -> None:
    h = Harness(None)
    j = job(models[0], "a", 2)
    h.batcher.submit(j)
    h.batcher.start()
    try:
        with pytest.raises(Unavailable, match="no verified model is loaded"):
            j.future.result(10)
    finally:
        h.batcher.stop()


def test_request_abandoned_while_queued_is_never_prefilled(models: tuple[LoadedModel, LoadedModel]) -> None:
    """A request that timed out before the worker took it (here the first one it takes) costs no row."""
    m = models[0]
    h = Harness(m, max_batch=8, max_wait_ms=50)
    gone, kept = job(m, "the", 3), job(m, "a", 3)
    for j in (gone, kept):
        h.batcher.submit(j)
    assert gone.future.cancel()  # what a request timeout does
    h.batcher.start()
    try:
        assert len(kept.future.result(30).tokens) == 3
    finally:
        h.batcher.stop()
    assert gone.out == []
    assert h.sample("inference_batch_size_count", {"phase": "prefill"}) == 1
    assert h.sample("inference_batch_size_sum", {"phase": "prefill"}) == 1  # kept only
