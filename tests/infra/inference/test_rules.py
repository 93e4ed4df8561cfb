"""Plan-time refusals of serving configs that AWS, the load balancer controller, the scheduler or the
autoscaler would refuse or silently get wrong: one line each (field, value, fix, doc), before any resource."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from infra.core.errors import ConfigErrors
from infra.core.project import CONFIG_KEY
from infra.inference.documents import inference as inf
from infra.plan import runner
from infra.schema.parse import parse_platform_config
from infra.stack.registry import Level
from tests.support.config_cases import (
    FACTS,
    RULES,
    SCHEMA,
    all_of,
    assert_refused,
    drop_at,
    set_at,
    variant_name,
)

REPO = Path(__file__).resolve().parents[3]
INF = "aiplat:platform.inference"
H = f"{INF}.https"
MODEL = "inference.models.gpt2-small"
V = "20261130T100100Z-step4"  # the shipped stacks' one model
M = f"aiplat:platform.{MODEL}"
OTHER_REGION_CERT = "arn:aws:acm:us-east-1:123456789012:certificate/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
CLOUDFRONT_ACL = (
    "arn:aws:wafv2:us-east-1:123456789012:global/webacl/edge/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
)
OTHER_ACCOUNT_ACL = (
    "arn:aws:wafv2:ap-east-1:210987654321:regional/webacl/edge/0b6c1e53-6f0e-4b0e-9d43-0f6d7f9c6d11"
)


def _servers(plan):
    """The vLLM Deployments of a plan (the router's is the other one in the namespace)."""
    return [
        r
        for r in plan.by_type("kubernetes:apps/v1:Deployment")
        if r.inputs["spec"]["template"]["metadata"]["labels"].items() >= inf.SELECTOR.items()
    ]


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
        # the controller's role may associate web ACLs of its own account only (lbc_waf_shield.py)
        "waf-other-account-acl",
        all_of(
            set_at("inference.https.waf", "arn"), set_at("inference.https.waf_acl_arn", OTHER_ACCOUNT_ACL)
        ),
        RULES,
        f"{H}.waf_acl_arn: the web ACL is account 210987654321's; the load balancer controller may attach "
        "only web ACLs of the stack's account 123456789012",
    ),
    (
        "waf-arn-missing",
        set_at("inference.https.waf", "arn"),
        RULES,
        f"{H}.waf_acl_arn: waf is 'arn' but no web ACL ARN is given",
    ),
    (
        "cpu-pool",
        set_at(f"{MODEL}.node_pools", ["system"]),
        RULES,
        f"{M}.node_pools.0: 'system' is a CPU pool (gpu: false): the server needs a GPU; fix: use one of "
        "the GPU pools: gpu",
    ),
    (
        "unknown-pool",
        set_at(f"{MODEL}.node_pools", ["gpus"]),
        RULES,
        f"{M}.node_pools.0: 'gpus' is not a pool of this stack",
    ),
    (
        "no-monitoring",
        set_at("monitoring.enabled", False),
        RULES,
        "aiplat:platform.monitoring.enabled: false, but inference autoscaling reads vLLM's "
        "vllm:num_requests_running and vllm:num_requests_waiting from this stack's Prometheus",
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
        set_at(f"{MODEL}.replicas.max", 20),
        FACTS,
        f"{M}.replicas.max: 20 replicas of 1 GPU(s) need 20 GPUs, but the pools ['gpu'] hold at most 16",
    ),
    (
        "tensor-parallel-beyond-the-pools",
        set_at(f"{MODEL}.engine.gpus_per_pod", 4),
        FACTS,
        f"{M}.replicas.max: 8 replicas of 4 GPU(s) need 32 GPUs, but the pools ['gpu'] hold at most 16 "
        "(Karpenter gpu_limit, managed max_size x GPUs per node): the autoscaler would add pods that never "
        "schedule; fix: lower replicas.max to 4",
    ),
    (
        "latest-in-production",
        set_at(f"{MODEL}.release.version", "latest"),
        RULES,
        f"{M}.release.version: 'latest': each new pod would serve whatever release is newest when it starts, "
        "so a publish changes production without a rollout",
    ),
    (
        "not-a-release-version",
        set_at(f"{MODEL}.release.version", "v2"),
        SCHEMA,
        f"{M}.release.version: 'v2' is not a release version; fix: use a folder name under "
        "release/<model>/ such as 20261130T100100Z-step4, or 'latest' (with allow_latest)",
    ),
    (
        "bfloat16-on-t4",
        set_at(f"{MODEL}.engine.dtype", "bfloat16"),
        RULES,
        f"{M}.engine.dtype: bfloat16, but pool 'gpu' may launch T4 GPUs, which have no bfloat16 (vLLM "
        "refuses to start there); fix: set dtype: auto",
    ),
    (
        "one-api-key",
        set_at("inference.auth.api_key_slots", 1),
        SCHEMA,
        f"{INF}.auth.api_key_slots",
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
    ("one-replica", set_at(f"{MODEL}.replicas.min", 1), SCHEMA, f"{M}.replicas.min"),
    (
        "adapters-without-lora",
        set_at(f"{MODEL}.adapters", {"support-bot": {"release": {"name": "support-bot", "version": V}}}),
        SCHEMA,
        f"{M}: adapters ['support-bot'] need LoRA serving; fix: add lora: {{max_loras: 4, "
        "max_lora_rank: 16}",
    ),
    (
        "lora-rank-vllm-refuses",
        set_at(f"{MODEL}.lora", {"max_lora_rank": 24}),
        SCHEMA,
        f"{M}.lora.max_lora_rank: 24 is not a rank vLLM accepts; fix: use one of [1, 8, 16, 32, 64, 128, "
        "256, 320, 512]",
    ),
    (
        "fewer-cpu-loras-than-loras",
        set_at(f"{MODEL}.lora", {"max_loras": 4, "max_cpu_loras": 2}),
        SCHEMA,
        f"{M}.lora: max_cpu_loras 2 < max_loras 4 (vLLM refuses it)",
    ),
    (
        "adapter-named-like-a-model",
        all_of(
            set_at(
                "inference.models.support-bot",
                {"release": {"name": "sb", "version": V}, "node_pools": ["gpu"]},
            ),
            set_at(f"{MODEL}.lora", {}),
            set_at(f"{MODEL}.adapters", {"support-bot": {"release": {"name": "support-bot", "version": V}}}),
        ),
        SCHEMA,
        f"{INF}: models.gpt2-small.adapters.support-bot: the served name 'support-bot' is also "
        "models.support-bot: clients pick a model by this name, so it must be unique in the stack; fix: "
        "rename one",
    ),
    (
        "served-name-not-a-label-value",
        set_at("inference.models.gpt2-", {"release": {"name": "gpt2-", "version": V}, "node_pools": ["gpu"]}),
        SCHEMA,
        f"{INF}.models.gpt2-",
    ),
    (
        "adapter-latest-in-production",
        all_of(
            set_at(f"{MODEL}.lora", {}),
            set_at(
                f"{MODEL}.adapters",
                {"support-bot": {"release": {"name": "support-bot", "version": "latest"}}},
            ),
        ),
        RULES,
        f"{M}.adapters.support-bot.release.version: 'latest': each new pod would serve whatever release is",
    ),
    (
        "min-above-max",
        set_at(f"{MODEL}.replicas", {"min": 6, "max": 4}),
        SCHEMA,
        f"{M}.replicas: min 6 > max 4",
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


def test_short_shutdown_timeout_is_a_warning(stack_config) -> None:
    raw = stack_config("prod-hk-infer")
    raw["inference"]["server"] = {"shutdown_timeout_s": 30, "request_timeout_s": 60}
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    (finding,) = [f for f in plan.findings if f.rule == "inference-shutdown-covers-requests"]
    assert finding.level is Level.warning
    assert finding.one_line().startswith(
        f"{INF}.server.shutdown_timeout_s: 30 s is shorter than request_timeout_s (60 s)"
    )
    (pod,) = _servers(plan)
    spec = pod.inputs["spec"]["template"]["spec"]
    (server,) = spec["containers"]
    assert server["args"][server["args"].index("--shutdown-timeout") + 1] == "30"
    assert spec["terminationGracePeriodSeconds"] > 15 + 30


def model_of(raw: dict, name: str = "gpt2-small") -> tuple:
    """(the parsed config, its model ``name``)."""
    cfg = parse_platform_config(raw)
    assert cfg.inference is not None
    return cfg, cfg.inference.models[name]


def test_dtype_follows_the_release_unless_the_gpus_disagree(stack_config) -> None:
    """auto: float16 while the pool mixes a T4 (g4dn) with GPUs that have bfloat16; once every GPU agrees,
    vLLM's own auto (the release's dtype on that GPU); a named dtype as it is."""
    from infra.inference.rules import engine_dtype

    raw = stack_config("prod-hk-infer")
    families = raw["cluster_services"]["karpenter"]["node_pools"]["gpu"]["instance_families"]
    assert "g4dn" in families and len(families) > 1
    assert engine_dtype(*model_of(raw)).value == "float16"
    for agree in (["g6", "g5"], ["g4dn"]):
        raw["cluster_services"]["karpenter"]["node_pools"]["gpu"]["instance_families"] = agree
        assert engine_dtype(*model_of(raw)).value == "auto", agree
    raw["inference"]["models"]["gpt2-small"]["engine"] = {"dtype": "float16"}
    assert engine_dtype(*model_of(raw)).value == "float16"


@pytest.mark.parametrize(
    ("engine", "release", "bf16", "runs"),
    [
        ("auto", "float32", True, "bfloat16"),
        ("auto", "float32", False, "float16"),
        ("auto", "bfloat16", True, "bfloat16"),
        ("auto", "bfloat16", False, "float16"),
        ("auto", "float16", True, "float16"),
        ("float16", "bfloat16", True, "float16"),
    ],
)
def test_serving_dtype_is_vllms_resolution(engine: str, release: str, bf16: bool, runs: str) -> None:
    from infra.inference.config import Dtype
    from infra.inference.rules import serving_dtype

    assert serving_dtype(Dtype(engine), release, bf16) == runs


def test_latest_only_where_allowed(stack_config, monitors) -> None:
    raw = stack_config("prod-hk-infer")
    raw["inference"]["models"]["gpt2-small"]["release"] = {
        "name": "gpt2-small",
        "version": "latest",
        "allow_latest": True,
    }
    raw["inference"].pop("global_endpoint")  # a stack of its own (with one, both regions agree on the model)
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    assert not [f for f in plan.findings if f.rule == "inference-model-version"]
    (pod,) = _servers(plan)
    (init,) = pod.inputs["spec"]["template"]["spec"]["initContainers"]
    assert init["command"][init["command"].index("--version") + 1] == "latest"


def test_a_blocking_body_limit_must_fit_the_longest_prompt(stack_config) -> None:
    raw = stack_config("prod-hk-infer")
    raw["inference"]["models"]["gpt2-small"]["engine"] = {"max_model_len": 2048}
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    (finding,) = [f for f in plan.findings if f.rule == "inference-body-limit"]
    assert finding.level is Level.warning
    assert finding.one_line().startswith(
        f"{M}.engine.max_model_len: 2048 tokens make requests of up to 13312 bytes, but the web ACL blocks "
        "bodies over 8192 bytes (SizeRestrictions_BODY)"
    )
    raw["inference"]["https"]["waf_count_rules"] = ["SizeRestrictions_BODY"]
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    assert not [f for f in plan.findings if f.rule == "inference-body-limit"]


def test_source_stack_that_does_not_build_the_images(tmp_path: Path) -> None:
    """Without digest or ref, the source stack must build the images (stack index rule)."""
    for stack in ("prod-us-train", "prod-hk-infer", "prod-sg-infer"):
        shutil.copy(REPO / "stacks" / f"Pulumi.{stack}.yaml", tmp_path)
    train = tmp_path / "Pulumi.prod-us-train.yaml"
    doc = yaml.safe_load(train.read_text())
    del doc["config"][CONFIG_KEY]["images"]["builds"]["inference"]
    del doc["config"][CONFIG_KEY]["images"]["builds"]["vllm"]
    del doc["config"][CONFIG_KEY]["images"]["builds"]["router"]
    train.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(ConfigErrors) as info:
        runner.run_plan("prod-hk-infer", stacks_dir=tmp_path)
    assert (
        f"{INF}.image: prod-us-train builds no 'inference' image (its images.builds: ['trainer']), so there "
        "is no image to run; fix: add images.builds.inference (dockerfile images/inference/Dockerfile) to "
        "prod-us-train, or set inference.image.digest or inference.image.ref"
    ) in str(info.value)
    assert (
        f"{INF}.engine.image: prod-us-train builds no 'vllm' image (its images.builds: ['trainer']), so "
        "there is no image to run; fix: add images.builds.vllm (dockerfile images/vllm/Dockerfile) to "
        "prod-us-train, or set inference.engine.image.digest or inference.engine.image.ref"
    ) in str(info.value)
    assert (
        f"{INF}.router.image: prod-us-train builds no 'router' image (its images.builds: ['trainer']), so "
        "there is no image to run; fix: add images.builds.router (dockerfile images/router/Dockerfile) to "
        "prod-us-train, or set inference.router.image.digest or inference.router.image.ref"
    ) in str(info.value)
    # a digest of the replicated repository is enough
    infer = tmp_path / "Pulumi.prod-hk-infer.yaml"
    doc = yaml.safe_load(infer.read_text())
    doc["config"][CONFIG_KEY]["inference"]["image"] = {"digest": "sha256:" + "c" * 64}
    doc["config"][CONFIG_KEY]["inference"]["engine"] = {"image": {"digest": "sha256:" + "d" * 64}}
    doc["config"][CONFIG_KEY]["inference"]["router"] = {"image": {"digest": "sha256:" + "e" * 64}}
    infer.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = runner.run_plan("prod-hk-infer", stacks_dir=tmp_path)
    (deployment,) = _servers(plan)
    pod = deployment.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (init,) = pod["initContainers"]
    assert container["image"].endswith(".ap-east-1.amazonaws.com/aiplat-prod/vllm@sha256:" + "d" * 64)
    assert init["image"].endswith(".ap-east-1.amazonaws.com/aiplat-prod/inference@sha256:" + "c" * 64)
    (router,) = [d for d in plan.by_type("kubernetes:apps/v1:Deployment") if d not in _servers(plan)]
    (container,) = router.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"].endswith(".ap-east-1.amazonaws.com/aiplat-prod/router@sha256:" + "e" * 64)


def test_every_gpu_model_of_the_table_says_whether_it_has_bfloat16() -> None:
    """The dtype rule reads one table: a GPU model added to infra/core/instance_types.py without a BF16 entry
    would count as lacking bfloat16."""
    from infra.core import instance_types

    assert {r.gpu_model for r in instance_types.TABLE.values()} == set(instance_types.BF16)
    assert instance_types.BF16["T4"] is False and instance_types.BF16["L4"] is True


def test_models_sharing_a_pool_beyond_its_gpus_is_a_warning(stack_config) -> None:
    """Each model fits the pool on its own; together at replicas.max they do not."""
    raw = stack_config("prod-hk-infer")
    raw["inference"].pop("global_endpoint")  # a stack of its own (else both regions serve the same names)
    raw["inference"]["models"]["gpt2-large"] = {
        "release": {"name": "gpt2-large", "version": V},
        "node_pools": ["gpu"],
        "replicas": {"min": 2, "max": 10},
    }
    plan = runner.run_plan(variant_name(raw), parse_platform_config(raw))
    (finding,) = [f for f in plan.findings if f.rule == "inference-gpu-capacity"]
    assert finding.level is Level.warning
    assert finding.one_line().startswith(
        f"{INF}.models.gpt2-large.replicas.max: models ['gpt2-small', 'gpt2-large'] share the pools ['gpu']: "
        "at their replicas.max they need 18 GPUs, the pools hold at most 16"
    )


def test_the_single_model_form_is_refused_with_its_models_form(stack_config, monitors) -> None:
    """The old ``inference.model`` section: refused before anything runs, the message carrying the section
    in the new form, which itself plans."""
    raw = stack_config("prod-hk-infer")
    model = raw["inference"]["models"].pop("gpt2-small")
    del raw["inference"]["models"]
    old = {
        "model": model["release"],
        "node_pools": model["node_pools"],
        "replicas": model["replicas"],
        "engine": {"served_model_name": "gpt2", "max_model_len": 512, "vllm_version": "0.33.0"},
        "autoscaling": {"target_requests_per_replica": 16, "keda": {"namespace": "autoscaling"}},
    }
    raw["inference"] = {**old, **raw["inference"]}
    message = assert_refused(raw, f"{INF}: 'model' is the single-model form", monitors, SCHEMA)
    (line,) = message.splitlines()
    assert 'stay shared; fix: write the section as {"inference": {"models": ' in line
    new = yaml.safe_load(line.split("fix: write the section as ", 1)[1])
    assert new["inference"]["models"] == {
        "gpt2": {
            "release": model["release"],
            "engine": {"max_model_len": 512},
            "node_pools": model["node_pools"],
            "replicas": model["replicas"],
            "autoscaling": {"target_requests_per_replica": 16},
        }
    }
    assert new["inference"]["engine"] == {"vllm_version": "0.33.0"}
    assert new["inference"]["keda"] == {"namespace": "autoscaling"}
    raw["inference"] = new["inference"]
    assert parse_platform_config(raw).inference.served_names() == {"gpt2": "gpt2"}
