"""The image cache's rules on the config: the rule prefix is the stack's own unless set, within ECR's 2-30
characters; the chart images' warning in the plan and refusal before a deployment."""

from __future__ import annotations

import json

from infra.keys.documents.kms_policy import DESCRIPTIONS, KeyPurpose
from infra.rules import Level, Phase, RuleContext, run_rules
from infra.schema.platform import PlatformConfig


def _findings(cfg: PlatformConfig, rule: str, phase: Phase = Phase.plan) -> list:
    return [f for f in run_rules(phase, RuleContext(cfg)) if f.rule == rule]


def test_the_prefix_is_the_stacks_own_and_a_too_long_one_is_refused(stack_config) -> None:
    raw = stack_config("prod-us-train")
    cfg = PlatformConfig.model_validate(raw)
    assert _findings(cfg, "image-cache-rules-accepted") == []
    # 'longcompany-platform-prod-train/ecr-public' is over ECR's 30 characters
    long = PlatformConfig.model_validate({**raw, "name_prefix": "longcompany-platform"})
    errors = _findings(long, "image-cache-rules-accepted")
    assert errors and {f.level for f in errors} == {Level.error}
    assert "aiplat:platform.image_cache.upstreams.ecr-public" in {f.field for f in errors}
    assert all("image_cache.prefix" in (f.fix or "") for f in errors)
    # a prefix of its own fixes it
    short = PlatformConfig.model_validate(
        {**raw, "name_prefix": "longcompany-platform", "image_cache": {"prefix": "lc-train"}}
    )
    assert _findings(short, "image-cache-rules-accepted") == []


def test_unpinned_images_warn_in_the_plan_and_refuse_in_preflight(stack_config) -> None:
    cfg = PlatformConfig.model_validate(stack_config("prod-us-train"))
    warned = {f.field for f in _findings(cfg, "chart-images-pinned")}
    refused = {f.field for f in _findings(cfg, "chart-images-pinned-to-deploy", Phase.preflight)}
    assert warned == refused and "aiplat:platform.cluster_services.efa_device_plugin" in warned
    # the charts whose digests are all recorded: no finding on them
    recorded = (
        ".cert_manager",
        ".nvidia_device_plugin",
        ".load_balancer_controller",
        ".metrics_server",
        ".dcgm_exporter",
        ".kueue",
    )
    assert not any(f.endswith(recorded) for f in warned), warned


def test_an_upstream_may_not_take_the_copy_areas_name(stack_config) -> None:
    raw = stack_config("prod-us-train")
    ups = {"k8s": {"url": "registry.k8s.io"}, "copy": {"url": "quay.io"}}
    cfg = PlatformConfig.model_validate({**raw, "image_cache": {"upstreams": ups}})
    errors = _findings(cfg, "image-cache-rules-accepted")
    assert [f.field for f in errors] == ["aiplat:platform.image_cache.upstreams.copy"]
    assert "name of the copy area" in errors[0].problem


def test_the_plan_creates_the_copy_areas_repositories_on_push(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    templates = [
        r for r in plan.resources if r.type == "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate"
    ]
    copy = [t for t in templates if t.inputs.get("appliedFors") == ["CREATE_ON_PUSH"]]
    assert len(copy) == 1
    inputs = copy[0].inputs
    assert inputs["prefix"] == "aiplat-prod-train/copy"
    assert inputs["imageTagMutability"] == "IMMUTABLE"
    assert "lifecyclePolicy" not in inputs  # a pinned digest never expires
    # the charts' copied images are under that prefix, in the stack's registry, by digest
    release = next(
        r for r in plan.resources if r.type == "kubernetes:helm.sh/v3:Release" and "grafana" in str(r.inputs)
    )
    image = release.inputs["values"]["grafana"]["image"]
    assert image["repository"] == "aiplat-prod-train/copy/docker.io/grafana/grafana"
    assert image["registry"].endswith(".dkr.ecr.us-east-1.amazonaws.com") and len(image["sha"]) == 64


def test_the_copy_areas_repositories_are_under_the_data_key_through_a_scoped_role(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    by_urn = {r.urn: r for r in plan.resources}
    [template] = [
        r
        for r in plan.by_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
        if r.inputs.get("appliedFors") == ["CREATE_ON_PUSH"]
    ]
    [encryption] = template.inputs["encryptionConfigurations"]
    assert encryption["encryptionType"] == "KMS"
    [key] = [by_urn[u] for u in template.property_dependencies["encryptionConfigurations"]]
    assert key.type == "aws:kms/key:Key"
    assert key.inputs["description"].endswith(DESCRIPTIONS[KeyPurpose.data])
    [role] = [by_urn[u] for u in template.property_dependencies["customRoleArn"]]
    [trust] = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
    assert trust["Principal"] == {"Service": "ecr.amazonaws.com"}
    assert trust["Condition"]["StringEquals"]["aws:SourceAccount"]
    # the role's policy is in place before the template (a push would create a repository ECR cannot encrypt)
    [grant] = [by_urn[u] for u in template.dependencies if by_urn[u].type == "aws:iam/rolePolicy:RolePolicy"]
    statements = {s["Sid"]: s for s in json.loads(grant.inputs["policy"])["Statement"]}
    [repositories] = statements["CreateRepositoriesOnPush"]["Resource"]
    assert repositories.endswith(":repository/aiplat-prod-train/copy/*")
    assert statements["EncryptWithTemplateKeys"]["Resource"] == [encryption["kmsKey"]]
    assert not any(a in s["Action"] for s in statements.values() for a in ("kms:Decrypt", "kms:*", "ecr:*"))
