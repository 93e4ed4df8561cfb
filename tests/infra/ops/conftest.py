"""A moto server per test module, reset to an empty account for every test, with boto3 pointed at it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from trainer.tools.moto_server import MotoServer


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoServer]:
    with MotoServer() as server:
        yield server


@pytest.fixture
def aws(moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """An empty account on the local moto server; boto3's default session talks to it."""
    moto_server.reset()
    for key, value in moto_server.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return moto_server
