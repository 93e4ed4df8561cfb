"""The real router between two real OpenAI-compatible servers on 127.0.0.1, each serving a tiny model of its
own, started with the Deployment's own command line (fleet.py)."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator

import pytest

from infra.inference.documents import inference as inf
from tests.infra.inference.router.fleet import Fleet, call, completion, running_fleet, stop

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    with running_fleet(tmp_path_factory.mktemp("router")) as f:
        yield f


def test_each_model_is_answered_by_its_own_backend(fleet: Fleet) -> None:
    for name, direct in fleet.backends.items():
        want_status, want = completion(direct, name)
        assert want_status == 200, want
        for _ in range(3):
            status, got = completion(fleet.router, name)
            assert status == 200, got
            # transformers serve names the folder it loaded (<name>@main); each backend holds only its own
            assert got["model"].split("@")[0] == name
            assert got["choices"][0]["text"] == want["choices"][0]["text"]
    texts = {completion(fleet.router, n)[1]["choices"][0]["text"] for n in fleet.backends}
    assert len(texts) == 2, "the two models answer alike: the test cannot tell the backends apart"


def test_model_list_names_the_declared_models(fleet: Fleet) -> None:
    status, body = call(f"{fleet.router}{inf.MODELS_PATH}")
    assert status == 200, body
    # vllm-router 0.1.17's own answer in multi-model mode: {"models": [...]} (docs/inference/router.md)
    assert sorted(body["models"]) == sorted(b.served_name for b in fleet.spec.backends)


def test_the_router_exports_its_metrics_per_backend(fleet: Fleet) -> None:
    completion(fleet.router, fleet.spec.backends[0].served_name)
    with urllib.request.urlopen(fleet.metrics, timeout=10) as r:
        text = r.read().decode()
    # the series the router's PodMonitor scrapes (vllm-router 0.1.17's names)
    assert "vllm_router_requests_total" in text
    assert f'worker="{fleet.backends[fleet.spec.backends[0].served_name]}"' in text


def test_nothing_is_served_without_a_key(fleet: Fleet) -> None:
    name = fleet.spec.backends[0].served_name
    for key in (None, "wrong-" + "x" * 40):
        assert completion(fleet.router, name, key=key)[0] == 401
        assert completion(fleet.backends[name], name, key=key)[0] == 401
    # paths the Ingress does not route are refused by the backends' gate, key or not
    status, _ = call(f"{fleet.backends[name]}/v1/chat/completions", {"model": name, "messages": []})
    assert status == 404
    # refused requests do not count against the backend: keyed ones still get through
    for _ in range(12):
        completion(fleet.router, name, key=None)
    assert completion(fleet.router, name)[0] == 200


def test_an_unknown_model_gets_no_completion(fleet: Fleet) -> None:
    status, body = completion(fleet.router, "no-such-model")
    assert status >= 400, body
    assert "choices" not in (body if isinstance(body, dict) else {})


def test_a_stopped_backend_answers_503_and_the_other_keeps_serving(fleet: Fleet) -> None:
    gone, kept = (b.served_name for b in fleet.spec.backends)
    stop(fleet.procs[gone])
    seen: list[int] = []
    # the router takes a backend out after HEALTH_FAILURES failed checks, health_check_interval_s apart, plus
    # its retries: generous for a busy machine, the loop ends at the first 503
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        status, body = completion(fleet.router, gone)
        seen.append(status)
        if status == 503:
            break
    assert seen[-1] == 503, seen
    assert all(s >= 500 for s in seen), seen
    # the other model is still served: on a saturated machine its own health check may time out for a
    # moment (the router answers 503 for it then, never another model's answer), so ask until it answers
    kept_seen: list[int] = []
    while time.monotonic() < deadline:
        status, body = completion(fleet.router, kept)
        kept_seen.append(status)
        if status == 200:
            break
    assert kept_seen[-1] == 200 and set(kept_seen) <= {200, 503}, kept_seen
    assert body["model"].split("@")[0] == kept
