"""k8s-internet-ingress-authenticated: an internet-facing inference Ingress without authentication is a
mandatory violation. The compliant case is the objects the program builds (infra/inference/documents); each
violating case changes one thing of them."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from infra.inference.documents import alb
from infra.inference.documents import inference as inf
from infra.inference.router import documents as rd
from infra.inference.router.config import RouterConfig
from tests.infra.inference.documents.test_inference import FETCH_IMAGE, IMAGE, ROOT, SPEC
from tests.policies.conftest import UNKNOWN, R

RULE = "k8s-internet-ingress-authenticated"
NS = "inference"
INGRESS = "kubernetes:networking.k8s.io/v1:Ingress"
SERVICE = "kubernetes:core/v1:Service"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
DATA = Path(__file__).resolve().parents[1] / "infra" / "inference" / "data"
SPEC_IN = alb.IngressSpec(
    internet_facing=True,
    tls_policy="ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
    health_path=inf.HEALTH_PATH,
    request_timeout_s=60,
    deregistration_delay_s=75,
    inbound_cidrs=["0.0.0.0/0"],
)


def stack(
    *,
    paths: list[str] | None = None,
    internet_facing: bool = True,
    container: dict[str, Any] | None = None,
    **ann,
) -> list[R]:
    annotations = alb.ingress_annotations(
        SPEC_IN.__class__(**{**SPEC_IN.__dict__, "internet_facing": internet_facing}),
        certificate_arn="arn:aws:acm:ap-east-1:1:certificate/x",
        waf_acl_arn=None,
    ) | {f"{alb.PREFIX}{k.replace('_', '-')}": v for k, v in ann.items()}
    spec = alb.ingress_spec(
        host="hk.example.com",
        service=inf.NAME,
        service_port=inf.SERVICE_PORT_NAME,
        paths=inf.api_paths(chat=False) if paths is None else paths,
    )
    deployment = inf.deployment_spec(SPEC, image=IMAGE, fetch_image=FETCH_IMAGE, release_root=ROOT)
    if container is not None:
        deployment["template"]["spec"]["containers"] = [container]
    meta = {"name": inf.NAME, "namespace": NS}
    return [
        R(INGRESS, "inference-ingress", {"metadata": {**meta, "annotations": annotations}, "spec": spec}),
        R(SERVICE, "inference-service", {"metadata": meta, "spec": inf.service_spec(SPEC)}),
        R(DEPLOYMENT, "inference-deployment", {"metadata": meta, "spec": deployment}),
    ]


def server(**changes: Any) -> dict[str, Any]:
    c = copy.deepcopy(inf.server_container(SPEC, image=IMAGE))
    c.update(changes)
    return c


def test_guarded_prefixes_are_vllms() -> None:
    """The prefixes the rule accepts are the ones vLLM 0.33.0 checks the key under
    (vllm/entrypoints/serve/middleware/authenticate.py, tests/infra/inference/data/vllm-auth.txt)."""
    line = next(ln for ln in (DATA / "vllm-auth.txt").read_text().splitlines() if "GUARDED_PREFIX" in ln)
    assert tuple(re.findall(r'"([^"]+)"', line.split(" = ", 1)[1])) == inf.VLLM_GUARDED_PREFIXES


def test_the_programs_objects_comply(check) -> None:
    check(RULE, stack(), None)
    check(RULE, stack(), None, dry_run=False)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (
            stack(paths=["/"]),
            "internet-facing Ingress 'inference-ingress' routes '/' to 'inference' without authentication",
        ),
        (
            stack(paths=["/v1/completions", "/metrics"]),
            "routes '/metrics' to 'inference' without authentication",
        ),
        (
            stack(container=server(args=["--model", "/models/x", "--port", "8000"])),
            "whose pods do not check API keys read from a Secret's file",
        ),
        (
            stack(
                container=server(args=["--model", "/models/x", "--api-key", "plain-text-key-in-the-pod-spec"])
            ),
            "whose pods do not check API keys",
        ),
        (
            # the form before issue 33: Secret values, but expanded by the kubelet onto the command line
            stack(
                container=server(
                    args=[
                        "--model",
                        "/models/x",
                        "--config",
                        inf.KEYS_FILE,
                        "--api-key",
                        "$(AIPLAT_API_KEY_0)",
                    ],
                    env=[
                        {
                            "name": "AIPLAT_API_KEY_0",
                            "valueFrom": {"secretKeyRef": {"name": inf.NAME, "key": "api-key-0"}},
                        }
                    ],
                )
            ),
            "whose pods do not check API keys",
        ),
        (
            stack(container=server(args=["--model", "/models/x", "--config", "/tmp/keys.yaml"])),
            "whose pods do not check API keys",
        ),
    ],
    ids=[
        "root-path",
        "metrics-path",
        "no-api-key",
        "key-in-plain-text",
        "keys-on-argv",
        "config-not-a-secret",
    ],
)
def test_unauthenticated_internet_ingress_is_a_violation(check, resources, expected) -> None:
    check(RULE, resources, expected)


def test_internal_or_alb_authenticated_ingresses_pass(check) -> None:
    check(RULE, stack(paths=["/"], internet_facing=False), None)
    check(RULE, stack(paths=["/"], auth_type="oidc"), None)


def test_unknown_pod_spec_is_deferred_at_preview_and_refused_after(check) -> None:
    resources = stack()
    resources[2].inputs["spec"]["template"]["spec"] = UNKNOWN
    check(RULE, resources, None)
    check(RULE, resources, "whose pods do not check API keys", dry_run=False)


ROUTER_IMAGE = "123456789012.dkr.ecr.ap-east-1.amazonaws.com/aiplat-prod/router@sha256:" + "c" * 64


def routed_stack(*, container: dict[str, Any] | None = None, backends_data: Any = None) -> list[R]:
    """The program's shape with the model-name router: Ingress -> router Service -> router pods, whose
    backends file (a ConfigMap) names the vLLM Service -> vLLM pods (infra/inference/router)."""
    resources = stack(container=container)
    ingress = resources[0].inputs
    for rule in ingress["spec"]["rules"]:
        for p in rule["http"]["paths"]:
            p["backend"]["service"]["name"] = rd.NAME
    spec = rd.router_spec(
        RouterConfig(),
        backends=[
            rd.Backend(
                served_name="gpt2-small",
                model="gpt2-small",
                adapter=False,
                service=inf.NAME,
                port=inf.SERVICE_PORT,
            )
        ],
        request_timeout_s=60,
        prestop_s=15,
        pools=["system"],
    )
    meta = {"name": rd.NAME, "namespace": NS}
    data = rd.backends_data(spec.backends, NS) if backends_data is None else backends_data
    deployment = rd.deployment_spec(spec, image=ROUTER_IMAGE)
    return [
        *resources,
        R(SERVICE, "inference-router-service", {"metadata": meta, "spec": rd.service_spec()}),
        R(DEPLOYMENT, "inference-router-deployment", {"metadata": meta, "spec": deployment}),
        R("kubernetes:core/v1:ConfigMap", "inference-router-backends", {"metadata": meta, "data": data}),
    ]


def test_the_router_passes_when_every_model_it_forwards_to_checks_keys(check) -> None:
    check(RULE, routed_stack(), None)
    check(RULE, routed_stack(), None, dry_run=False)


def test_the_router_fails_when_a_backend_checks_no_key_or_is_unknown(check) -> None:
    plain = server(args=["--model", "/models/x", "--port", "8000"])
    check(RULE, routed_stack(container=plain), "whose pods do not check API keys", dry_run=False)
    # a backend URL that names no Service of the plan, and a backends file nobody can read
    elsewhere = {rd.BACKENDS_FILE_NAME: json.dumps([{"model_id": "m", "url": "http://10.0.0.1:80"}])}
    check(RULE, routed_stack(backends_data=elsewhere), "whose pods do not check API keys", dry_run=False)
    check(RULE, routed_stack(backends_data=UNKNOWN), None)
    check(RULE, routed_stack(backends_data=UNKNOWN), "whose pods do not check API keys", dry_run=False)
