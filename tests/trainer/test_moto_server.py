"""The moto helper's readiness wait holds when the machine is busy: it does not depend on how much state the
emulator holds, and a slow first answer is waited for rather than cut off."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from moto.moto_api._internal import urls as moto_api_urls

from trainer.tools.moto_server import READY_PATH, MotoServer


def _slow(handler: Any, seconds: float, calls: list[float]) -> Any:
    def slow_handler(request: Any, full_url: str, headers: Any) -> Any:
        calls.append(time.monotonic())
        time.sleep(seconds)
        return handler(request, full_url, headers)

    return slow_handler


def test_start_does_not_read_the_emulator_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """``/moto-api/data.json`` serialises every backend; late in a session on busy cores it takes seconds.
    Readiness must not wait on it."""
    key = "{0}/moto-api/data.json"
    calls: list[float] = []
    monkeypatch.setitem(moto_api_urls.url_paths, key, _slow(moto_api_urls.url_paths[key], 3.0, calls))
    with MotoServer() as server:
        server.client("s3").create_bucket(Bucket="ready")
        names = [b["Name"] for b in server.client("s3").list_buckets()["Buckets"]]
    assert "ready" in names
    assert calls == []  # the state dump was never asked for


def test_a_slow_first_answer_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first answer of a server whose cores are busy can take longer than a second: one try gets what is
    left of the deadline instead of a fixed one-second cut-off."""
    key = "{0}" + READY_PATH
    calls: list[float] = []
    first = threading.Event()
    handler = moto_api_urls.url_paths[key]

    def slow_once(request: Any, full_url: str, headers: Any) -> Any:
        calls.append(time.monotonic())
        if not first.is_set():
            first.set()
            time.sleep(2.5)
        return handler(request, full_url, headers)

    monkeypatch.setitem(moto_api_urls.url_paths, key, slow_once)
    server = MotoServer().start(timeout=60)
    try:
        assert server.running
        assert len(calls) == 1  # the slow answer was taken, not abandoned and retried
    finally:
        server.stop()
