"""Plan-time refusals of serving configs that AWS, the load balancer controller, the scheduler or the
autoscaler would refuse or silently get wrong: one line each (field, value, fix, doc), before any resource."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from infra.core.errors import ConfigErrors
from infra.core.project import CONFIG_KEY
from infra.plan import runner
from infra.stack.parse import parse_platform_config
from infra.stack.registry import Level
from tests.support.config_cases import FACTS, RULES, SCHEMA, all_of, assert_refused, drop_at, set_at

REPO = Path(__file__).resolve().parents[3]
INF = "aiplat:platform.inference"
H = f"{INF}.https"
OTHER_REGION_CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
CLOUDFRONT_ACL = (
    "arn:aws:wafv2:us-east-1:123456789012:global/webacl/edge/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
)


NO_ZONE = all_of(drop_at("inference.https.dns_zone_id"), drop_at("inference.https.dns_zone_name"))

CASES = [
    (
        "tls12-policy",
        set_at("inference.https.tls_policy", "ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09"),
        RULES,
        f"{H}.tls_policy: ELBSecurityPolicy-TLS13-1-2-Res-PQ-2025-09 is not a TLS 1.3-only security policy "
        "(clients could negotiate TLS 1.2 or older); fix: use one of ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
    ),
    (
        "controller-default-policy",
        set_at("inference.https.tls_policy", "ELBSecurityPolicy-2016-08"),
        RULES,
        "describe-ssl-policies.html",
    ),
    (
        "internet-facing-without-certificate",
        NO_ZONE,
        RULES,
        f"{H}.certificate_arn: no certificate for hk.inference.example.com: the internet-facing ALB serves "
        "HTTPS only and its 443 listener cannot be created without one",
    ),
    (
        "certificate-other-region",
        all_of(NO_ZONE, set_at("inference.https.certificate_arn", OTHER_REGION_CERT)),
        RULES,
        f"{H}.certificate_arn: the certificate is in us-east-1, the load balancer in ap-east-1: an ALB takes "
        "ACM certificates of its own region only",
    ),
    (
        "domain-outside-zone",
        set_at("inference.https.domain", "hk.inference.example.org"),
        RULES,
        f"{H}.domain: hk.inference.example.org is not in the zone example.com",
    ),
    (
        "domain-at-apex",
        set_at("inference.https.domain", "example.com"),
        RULES,
        f"{H}.domain: example.com is the zone apex of example.com",
    ),
    (
        "waf-cloudfront-acl",
        all_of(set_at("inference.https.waf", "arn"), set_at("inference.https.waf_acl_arn", CLOUDFRONT_ACL)),
        RULES,
        f"{H}.waf_acl_arn: the web ACL is global in us-east-1; an ALB in ap-east-1 takes only a regional "
        "WAFv2 web ACL of its own region",
    ),
    (
        "waf-arn-missing",
        set_at("inference.https.waf", "arn"),
        RULES,
        f"{H}.waf_acl_arn: waf is 'arn' but no web ACL ARN is given",
    ),
    (
        "cpu-pool",
        set_at("inference.node_pools", ["system"]),
        RULES,
        f"{INF}.node_pools.0: 'system' is a CPU pool (gpu: false): the server needs a GPU; fix: use one of "
        "the GPU pools: gpu",
    ),
    (
        "unknown-pool",
        set_at("inference.node_pools", ["gpus"]),
        RULES,
        f"{INF}.node_pools.0: 'gpus' is not a pool of this stack",
    ),
    (
        "no-monitoring",
        set_at("monitoring.enabled", False),
        RULES,
        "aiplat:platform.monitoring.enabled: false, but inference autoscaling reads "
        "inference_requests_in_flight from this stack's Prometheus",
    ),
    (
        "no-load-balancer-controller",
        set_at("cluster_services.load_balancer_controller.enabled", False),
        RULES,
        "aiplat:platform.cluster_services.load_balancer_controller.enabled: false, but inference is served "
        "through an ALB Ingress",
    ),
    (
        "no-source-stack",
        drop_at("storage.source_stack"),
        RULES,
        "aiplat:platform.storage.source_stack: inference needs the model replica of a train stack",
    ),
    (
        "more-replicas-than-gpus",
        set_at("inference.replicas.max", 20),
        FACTS,
        f"{INF}.replicas.max: 20 replicas need 20 GPUs, but the pools ['gpu'] hold at most 16",
    ),
    (
        "image-tag",
        set_at("inference.image", {"ref": "123456789012.dkr.ecr.ap-east-1.amazonaws.com/x/inference:latest"}),
        SCHEMA,
        f"{INF}.image.ref: '123456789012.dkr.ecr.ap-east-1.amazonaws.com/x/inference:latest' is not an image "
        "named by digest",
    ),
    (
        "image-digest-and-ref",
        set_at(
            "inference.image",
            {"digest": "sha256:" + "a" * 64, "ref": "public.ecr.aws/x/inference@sha256:" + "a" * 64},
        ),
        SCHEMA,
        f"{INF}.image: set at most one of digest",
    ),
    (
        "zone-id-without-name",
        drop_at("inference.https.dns_zone_name"),
        SCHEMA,
        f"{H}: dns_zone_id and dns_zone_name go together",
    ),
    ("one-replica", set_at("inference.replicas.min", 1), SCHEMA, f"{INF}.replicas.min"),
    (
        "min-above-max",
        set_at("inference.replicas", {"min": 6, "max": 4}),
        SCHEMA,
        f"{INF}.replicas: min 6 > max 4",
    ),
]


@pytest.mark.parametrize(("name", "mutate", "stage", "expected"), CASES, ids=[c[0] for c in CASES])
def test_refused_before_any_resource(stack_config, monitors, name, mutate, stage, expected) -> None:
    raw = stack_config("prod-hk-infer")
    mutate(raw)
    assert_refused(raw, expected, monitors, stage)


def test_inference_on_a_train_stack_is_refused(stack_config) -> None:
    raw = stack_config("prod-us-train")
    raw["inference"] = stack_config("prod-hk-infer")["inference"]
    with pytest.raises(ConfigErrors, match="inference is set on a train stack"):
        parse_platform_config(raw)


def test_short_graceful_shutdown_is_a_warning(stack_config) -> None:
    raw = stack_config("prod-hk-infer")
    raw["inference"]["server"] = {"graceful_shutdown_s": 30, "request_timeout_s": 60}
    plan = runner.run_plan("short", parse_platform_config(raw))
    (finding,) = [f for f in plan.findings if f.rule == "inference-shutdown-covers-requests"]
    assert finding.level is Level.warning
    assert finding.one_line().startswith(
        f"{INF}.server.graceful_shutdown_s: 30 s is shorter than request_timeout_s (60 s)"
    )
    (pod,) = [r for r in plan.by_type("kubernetes:apps/v1:Deployment")]
    assert pod.inputs["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 15 + 30 + 10


def test_source_stack_that_does_not_build_the_image(tmp_path: Path) -> None:
    """Without image.digest or image.ref, the source stack must build the image (stack index rule)."""
    for stack in ("prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        shutil.copy(REPO / "stacks" / f"Pulumi.{stack}.yaml", tmp_path)
    train = tmp_path / "Pulumi.prod-us-train.yaml"
    doc = yaml.safe_load(train.read_text())
    del doc["config"][CONFIG_KEY]["images"]["builds"]["inference"]
    train.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigErrors) as info:
        runner.run_plan("prod-hk-infer", stacks_dir=tmp_path)
    assert (
        f"{INF}.image: prod-us-train builds no 'inference' image (its images.builds: ['trainer']), so there "
        "is no image to run; fix: add images.builds.inference (dockerfile images/inference/Dockerfile) to "
        "prod-us-train, or set inference.image.digest or inference.image.ref"
    ) in str(info.value)
    # a digest of the replicated repository is enough
    infer = tmp_path / "Pulumi.prod-hk-infer.yaml"
    doc = yaml.safe_load(infer.read_text())
    doc["config"][CONFIG_KEY]["inference"]["image"] = {"digest": "sha256:" + "c" * 64}
    infer.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = runner.run_plan("prod-hk-infer", stacks_dir=tmp_path)
    (deployment,) = plan.by_type("kubernetes:apps/v1:Deployment")
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"].endswith(".ap-east-1.amazonaws.com/aiplat-prod/inference@sha256:" + "c" * 64)
