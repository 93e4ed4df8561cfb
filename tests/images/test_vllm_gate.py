"""The gate middleware of the vLLM image (images/vllm/aiplat_vllm/gate.py) on CPU, as vLLM mounts it: around
an ASGI app that answers every path (as vLLM's server answers /invocations, /tokenize, ... without a key),
driven with real ASGI messages. The keys come from the file the Deployment mounts, written by the same
builder (infra/inference/documents/inference.py api_keys_secret_data)."""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from infra.inference.documents import inference as inf
from tests.conftest import REPO

KEYS = ["k" * 32, "l" * 32]
GATE_KEY = "g" * 48


def _gate_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "aiplat_vllm_gate", REPO / "images/vllm/aiplat_vllm/gate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gate = _gate_module()


async def _backend(scope: dict, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


def _request(app: Any, path: str, key: str | None = None, method: str = "POST") -> int:
    headers = [(b"authorization", f"Bearer {key}".encode())] if key else []
    scope = {"type": "http", "method": method, "path": path, "headers": headers, "root_path": ""}
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent[0]["status"]


@pytest.fixture
def app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    data = inf.api_keys_secret_data(KEYS, slots=2, source="t", gate_key=GATE_KEY)
    (tmp_path / inf.KEYS_FILE_NAME).write_text(data[inf.KEYS_FILE_NAME])
    monkeypatch.setenv(inf.GATE_KEYS_FILE_ENV, str(tmp_path / inf.KEYS_FILE_NAME))
    monkeypatch.setenv(inf.GATE_PATHS_ENV, ",".join(inf.api_paths(chat=False)))
    return gate.GateMiddleware(_backend)  # as vLLM builds it: the app alone


@pytest.mark.parametrize("path", ["/invocations", "/tokenize", "/detokenize", "/v1/embeddings", "/pooling"])
def test_every_unrouted_path_is_refused_with_or_without_a_key(app, path: str) -> None:
    assert _request(app, path) == 404
    assert _request(app, path, KEYS[0]) == 404


@pytest.mark.parametrize("path", inf.api_paths(chat=False))
def test_routed_paths_need_one_of_the_keys(app, path: str) -> None:
    assert _request(app, path) == 401
    assert _request(app, path, "x" * 32) == 401
    for key in [*KEYS, GATE_KEY]:
        assert _request(app, path, key) == 200


def test_health_and_metrics_need_no_key(app) -> None:
    assert _request(app, "/health", method="GET") == 200
    assert _request(app, "/metrics", method="GET") == 200


def test_a_gate_without_keys_refuses_to_start(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(json.dumps({"api-key": []}))
    with pytest.raises(ValueError, match="no 'api-key' list"):
        gate.read_keys(str(tmp_path / "c.yaml"))


def test_the_middleware_loads_as_vllm_names_it() -> None:
    """vLLM imports ``--middleware`` by its dotted path (register.py: rsplit('.', 1), importlib, a class goes
    to app.add_middleware); the Dockerfile puts the package on PYTHONPATH."""
    module, _, cls = inf.GATE_MIDDLEWARE.rpartition(".")
    assert (REPO / "images/vllm" / (module.replace(".", "/") + ".py")).is_file()
    assert isinstance(getattr(gate, cls), type)
    dockerfile = (REPO / "images/vllm/Dockerfile").read_text()
    assert "COPY images/vllm/aiplat_vllm/ /opt/aiplat/aiplat_vllm/" in dockerfile
    assert "PYTHONPATH=/opt/aiplat" in dockerfile
    ignore = (REPO / "images/vllm/Dockerfile.dockerignore").read_text()
    assert "!images/vllm/aiplat_vllm/" in ignore
