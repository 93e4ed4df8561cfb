"""The serving components built with chosen arguments: the certificate's validation record takes ACM's
answer for its own name, and the web ACL's rules (rate limit first, managed groups, count overrides)."""

from __future__ import annotations

import pulumi

from infra.inference.component.serving import (
    MANAGED_RULE_GROUPS,
    InferenceWebAcl,
    InferenceWebAclArgs,
    ServingCertificate,
    ServingCertificateArgs,
)
from tests.conftest import build


def test_validation_record_is_acms_cname_for_the_domain_in_the_zone() -> None:
    plan = build(
        lambda p: ServingCertificate(
            "cert",
            ServingCertificateArgs(domain="api.example.com", zone_id="Z123EXAMPLE"),
            opts=pulumi.ResourceOptions(provider=p),
        ),
        region="ap-southeast-1",
    )
    cert = plan.one("aws:acm/certificate:Certificate")
    record = plan.one("aws:route53/record:Record")
    validation = plan.one("aws:acm/certificateValidation:CertificateValidation")
    assert cert.inputs["validationMethod"] == "DNS" and cert.inputs["domainName"] == "api.example.com"
    # the name and value ACM asks for (the mock answers in DescribeCertificate's shape)
    assert record.inputs["type"] == "CNAME" and record.inputs["zoneId"] == "Z123EXAMPLE"
    assert record.inputs["name"].startswith("_") and record.inputs["name"].endswith(".api.example.com.")
    assert record.inputs["records"][0].endswith(".acm-validations.aws.")
    assert validation.inputs["validationRecordFqdns"] == [record.inputs["name"].rstrip(".")]
    assert record.urn in validation.dependencies and cert.urn in validation.dependencies


def test_web_acl_is_regional_rate_limited_and_counts_only_the_named_rules() -> None:
    plan = build(
        lambda p: InferenceWebAcl(
            "waf",
            InferenceWebAclArgs(
                name="acl", metric_prefix="m", rate_limit=500, count_rules=["SizeRestrictions_BODY"]
            ),
            opts=pulumi.ResourceOptions(provider=p),
        )
    )
    acl = plan.one("aws:wafv2/webAcl:WebAcl").inputs
    assert acl["scope"] == "REGIONAL" and acl["defaultAction"] == {"allow": {}}
    rules = sorted(acl["rules"], key=lambda r: r["priority"])
    assert rules[0]["statement"]["rateBasedStatement"] == {
        "aggregateKeyType": "IP",
        "limit": 500,
        "evaluationWindowSec": 300,
    }
    assert rules[0]["action"] == {"block": {}}
    groups = [r["statement"]["managedRuleGroupStatement"] for r in rules[1:]]
    assert [g["name"] for g in groups] == list(MANAGED_RULE_GROUPS)
    assert all(g["vendorName"] == "AWS" for g in groups)
    overrides = {g["name"]: g.get("ruleActionOverrides") for g in groups}
    assert overrides["AWSManagedRulesCommonRuleSet"] == [
        {"name": "SizeRestrictions_BODY", "actionToUse": {"count": {}}}
    ]
    assert overrides["AWSManagedRulesKnownBadInputsRuleSet"] is None
    assert all(r["visibilityConfig"]["cloudwatchMetricsEnabled"] for r in rules)
    assert len({r["priority"] for r in rules}) == len(rules)
