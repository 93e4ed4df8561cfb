"""The image cache's rules on the config: the rule prefix is the stack's own unless set, within ECR's 2-30
characters; the chart images' warning in the plan and refusal before a deployment."""

from __future__ import annotations

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
    assert warned == refused and "aiplat:platform.cluster_services.nvidia_device_plugin" in warned
    # cert-manager's and Karpenter's digests are all recorded: no finding on them
    assert not any(f.endswith((".cert_manager", ".karpenter")) for f in warned)
