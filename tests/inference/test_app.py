"""The HTTP API (inference/app.py) over real HTTP: uvicorn in a thread on a free port."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from inference.app import Service, create_app
from inference.config import ServerConfig
from tests.inference.conftest import MODEL, Publisher
from trainer.ports import free_port


@contextmanager
def serving(service: Service) -> Iterator[str]:
    """Run the app with uvicorn in a thread; yields its base URL."""
    config = uvicorn.Config(create_app(service), host="127.0.0.1", port=free_port(), log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{config.port}"
    finally:
        server.should_exit = True
        thread.join(20)


def call(url: str, body: Any = None, *, raw: bytes | None = None, headers: dict[str, str] | None = None
         ) -> tuple[int, dict[str, str], Any]:  # fmt: skip
    """(status, headers, parsed JSON or text) of a GET, or a POST when a body is given."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    hdrs = {"Content-Type": "application/json", **(headers or {})} if data is not None else {}
    req = urllib.request.Request(url, data=data, headers=hdrs, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, h, text = r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        status, h, text = e.code, dict(e.headers), e.read().decode()
    try:
        return status, h, json.loads(text)
    except ValueError:
        return status, h, text


def wait_ready(base: str, timeout: float = 30) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status, _, body = call(f"{base}/readyz")
        if status == 200:
            return body
        assert time.monotonic() < deadline, body
        time.sleep(0.05)


def metric(base: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """One sample from GET /metrics (parsed with prometheus_client's own parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    _, _, text = call(f"{base}/metrics")
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and s.labels == (labels or {}):
                return s.value
    return None


def service_for(root: Path, cache: Path, **kw: object) -> Service:
    cfg = ServerConfig(release_root=str(root), model_name=MODEL, cache_dir=str(cache), **kw)  # type: ignore[arg-type]
    svc = Service(cfg)
    svc.store.check_cache_dir()
    return svc


def test_not_ready_without_a_release_but_alive(work: Path) -> None:
    svc = service_for(work / "rel", work / "cache")
    with serving(svc) as base:
        assert call(f"{base}/healthz")[0] == 200
        status, _, body = call(f"{base}/readyz")
        assert status == 503 and body["ready"] is False
        assert body["reason"].startswith(
            f"no verified model loaded: no release under {work / 'rel'}/release/"
        )
        status, headers, body = call(f"{base}/v1/generate", {"prompt": "hi"})
        assert (
            status == 503 and headers["retry-after"] == "5" and body["error"].startswith("no verified model")
        )
        assert metric(base, "inference_requests_total", {"code": "503"}) == 1
        assert metric(base, "inference_model_ready") == 0


@pytest.fixture(scope="module")
def live(checkpoints: Path, inference_tmp: Path) -> Iterator[tuple[str, Service, str]]:
    """A server with the step-2 release of the session's run loaded: (base URL, service, version)."""
    root = inference_tmp / "app-rel"
    v1 = Publisher(checkpoints, root)(2)
    svc = service_for(
        root, inference_tmp / "app-cache", max_new_tokens=20, default_max_new_tokens=10, max_prompt_bytes=64
    )
    with serving(svc) as base:
        wait_ready(base)
        yield base, svc, v1.version


def test_generates_text_with_the_served_version(live: tuple[str, Service, str]) -> None:
    base, _, version = live
    assert wait_ready(base) == {"ready": True, "model_name": MODEL, "model_version": version}
    status, _, body = call(
        f"{base}/v1/generate", {"prompt": "the quick", "max_new_tokens": 8, "temperature": 0}
    )
    assert status == 200, body
    assert body["model_name"] == MODEL and body["model_version"] == version
    assert body["prompt_tokens"] == 10  # start token + 9 bytes
    assert 1 <= body["generated_tokens"] <= 8 and isinstance(body["text"], str)
    assert body["finish_reason"] == ("length" if body["generated_tokens"] == 8 else "eot")
    # Greedy is deterministic; sampling with top_k=1 is greedy too.
    again = call(f"{base}/v1/generate", {"prompt": "the quick", "max_new_tokens": 8, "temperature": 0})[2]
    top1 = call(f"{base}/v1/generate", {"prompt": "the quick", "max_new_tokens": 8, "top_k": 1})[2]
    assert again["text"] == body["text"] == top1["text"]
    status, _, info = call(f"{base}/v1/model")
    assert status == 200 and info["model_version"] == version and info["step"] == 2
    assert info["context_tokens"] == 32 and info["device"] == "cpu"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({}, "prompt: Field required"),
        ({"prompt": 5}, "prompt: Input should be a valid string"),
        ({"prompt": "a", "max_new_tokens": "5"}, "max_new_tokens: Input should be a valid integer"),
        ({"prompt": "a", "max_new_tokens": 0}, "max_new_tokens: Input should be greater than or equal to 1"),
        ({"prompt": "a", "max_new_tokens": 21}, "max_new_tokens: 21 is over this server's limit of 20"),
        ({"prompt": "a", "temperature": -1}, "temperature: Input should be greater than or equal to 0"),
        ({"prompt": "a", "top_k": -2}, "top_k: Input should be greater than or equal to 0"),
        ({"prompt": "a", "temp": 1}, "temp: Extra inputs are not permitted"),
        ({"prompt": "é" * 33}, "prompt: 66 UTF-8 bytes is over the limit of 64"),
        (
            {"prompt": "x" * 20, "max_new_tokens": 12},
            "prompt (21 tokens with the start token) + max_new_tokens (12) is over the model's context of 32 "
            "tokens; shorten the prompt or lower max_new_tokens",
        ),
        ([1, 2], "body must be a JSON object, sent with Content-Type: application/json"),
    ],
)
def test_bad_requests_get_422_with_one_line(live: tuple[str, Service, str], body: Any, message: str) -> None:
    base = live[0]
    status, _, got = call(f"{base}/v1/generate", body)
    assert (status, got) == (422, {"error": message})


def test_malformed_json_wrong_content_type_and_oversized_body(live: tuple[str, Service, str]) -> None:
    base = live[0]
    status, _, got = call(f"{base}/v1/generate", raw=b'{"prompt": ')
    assert status == 422 and got["error"].startswith("body is not valid JSON at character 11")
    status, _, got = call(
        f"{base}/v1/generate", raw=b'{"prompt": "a"}', headers={"Content-Type": "text/plain"}
    )
    assert (status, got) == (
        422,
        {"error": "body must be a JSON object, sent with Content-Type: application/json"},
    )
    before = metric(base, "inference_requests_total", {"code": "413"}) or 0
    big = json.dumps({"prompt": "x" * 2000}).encode()
    status, _, got = call(f"{base}/v1/generate", raw=big)
    # The limit: 6 x max_prompt_bytes (64; JSON escapes can take 6 bytes a character) + 1 KiB for the rest.
    assert status == 413 and got["error"] == f"request body of {len(big)} bytes is over the 1408-byte limit"
    assert metric(base, "inference_requests_total", {"code": "413"}) == before + 1


def test_metrics_count_what_was_served(live: tuple[str, Service, str]) -> None:
    base, _, version = live
    ok_before = metric(base, "inference_requests_total", {"code": "200"}) or 0
    tokens_before = metric(base, "inference_generated_tokens_total") or 0
    lat_before = metric(base, "inference_request_duration_seconds_count") or 0
    got = [call(f"{base}/v1/generate", {"prompt": p, "max_new_tokens": 5})[2] for p in ("a", "bb", "ccc")]
    assert metric(base, "inference_requests_total", {"code": "200"}) == ok_before + 3
    assert metric(base, "inference_generated_tokens_total") == tokens_before + sum(
        g["generated_tokens"] for g in got
    )
    assert metric(base, "inference_request_duration_seconds_count") == lat_before + 3
    assert metric(base, "inference_requests_in_flight") == 0
    assert metric(base, "inference_tokens_per_second") > 0
    assert metric(base, "inference_model_info", {"model_name": MODEL, "version": version, "step": "2"}) == 1
    assert metric(base, "inference_model_ready") == 1
    assert metric(base, "inference_model_load_failures_total", {"reason": "invalid_release"}) == 0


def test_draining_turns_readiness_false_and_still_serves(live: tuple[str, Service, str]) -> None:
    """Between SIGTERM and closing the listener (the drain delay), requests that still arrive are served."""
    base, svc, _ = live
    svc.draining = True
    try:
        status, _, body = call(f"{base}/readyz")
        assert (status, body) == (503, {"ready": False, "reason": "draining: the server is shutting down"})
        assert call(f"{base}/v1/generate", {"prompt": "a", "max_new_tokens": 2})[0] == 200
        assert call(f"{base}/healthz")[0] == 200
        assert metric(base, "inference_model_ready") == 0
    finally:
        svc.draining = False


def test_generation_past_the_timeout_is_504_and_leaves_the_batch(checkpoints: Path, work: Path) -> None:
    Publisher(checkpoints, work / "rel")(2)
    svc = service_for(work / "rel", work / "cache", request_timeout_s=0.3, debug_step_delay_ms=100)
    with serving(svc) as base:
        wait_ready(base)
        status, _, body = call(f"{base}/v1/generate", {"prompt": "a", "max_new_tokens": 20, "temperature": 0})
        assert (status, body) == (504, {"error": "generation did not finish within 0.3s"})
        assert metric(base, "inference_requests_total", {"code": "504"}) == 1
        assert metric(base, "inference_requests_in_flight") == 0
        time.sleep(0.5)  # a few steps later the abandoned row is gone: nothing generates any more
        tokens = metric(base, "inference_generated_tokens_total")
        time.sleep(0.5)
        assert metric(base, "inference_generated_tokens_total") == tokens < 20
