"""The router's documents: its command line parses with the pinned vllm-router's own parser, the backends file
reads back to the Services it names, and a backend list the router would mishandle is refused."""

from __future__ import annotations

import json

import pytest

from infra.inference.router import documents as rd
from infra.inference.router.config import RouterConfig

BACKENDS = [
    rd.Backend(served_name="gpt2-small", model="gpt2-small", adapter=False, service="inference", port=80),
    rd.Backend(
        served_name="phi-3-mini", model="phi-3-mini", adapter=False, service="inference-phi-3-mini", port=80
    ),
]


def spec(backends: list[rd.Backend] = BACKENDS) -> rd.RouterSpec:
    return rd.router_spec(
        RouterConfig(), backends=backends, request_timeout_s=60, prestop_s=15, pools=["system"]
    )


def test_the_pinned_router_parses_the_deployments_arguments() -> None:
    from vllm_router.launch_router import parse_router_args

    (container,) = rd.deployment_spec(spec(), image="x@sha256:" + "a" * 64)["template"]["spec"]["containers"]
    args = container["args"]
    router = parse_router_args(args[args.index("--") + 1 :])
    assert router.enable_igw is True
    assert (router.host, router.port) == ("0.0.0.0", rd.PORT)
    assert (router.prometheus_host, router.prometheus_port) == ("0.0.0.0", rd.METRICS_PORT)
    assert router.policy == RouterConfig().policy.value
    assert router.health_check_endpoint == rd.HEALTH_PATH
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {rd.PORT_NAME: router.port, rd.METRICS_PORT_NAME: router.prometheus_port}


def test_the_backends_file_names_each_models_service() -> None:
    text = rd.backends_data(BACKENDS, "inference")[rd.BACKENDS_FILE_NAME]
    assert [b["model_id"] for b in json.loads(text)] == [b.served_name for b in BACKENDS]
    assert rd.backend_services(text) == [("inference", b.service) for b in BACKENDS]


def test_a_served_name_twice_or_no_backend_is_refused() -> None:
    twice = [
        *BACKENDS,
        rd.Backend(served_name="gpt2-small", model="gpt2-small", adapter=False, service="other", port=80),
    ]
    with pytest.raises(ValueError, match=r"served names \['gpt2-small'\] name more than one backend"):
        spec(twice)
    with pytest.raises(ValueError, match="needs at least one backend"):
        spec([])


def test_a_url_that_names_no_service_is_not_read_as_one() -> None:
    with pytest.raises(ValueError, match="names no Service"):
        rd.backend_services(json.dumps([{"model_id": "m", "url": "http://10.0.0.1:80"}]))
