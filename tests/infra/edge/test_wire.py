"""The global endpoint in the plans of both infer stacks: each region's latency record aliases that
region's own load balancer with health evaluation on and its drain switch as health check; each region has
a certificate for the global name, and one validation record exists across the stacks."""

from __future__ import annotations

import pytest

from infra.plan.runner import Plan

INFER = ["prod-hk-infer", "prod-sg-infer"]
RECORD = "aws:route53/record:Record"
GLOBAL = "api.inference.example.com"


@pytest.fixture(scope="module")
def plans(plan_stack) -> dict[str, Plan]:
    return {s: plan_stack(s) for s in INFER}


def _latency(plan: Plan):
    (record,) = [r for r in plan.by_type(RECORD) if r.inputs.get("setIdentifier")]
    return record


@pytest.mark.parametrize("stack", INFER)
def test_each_region_s_entry_points_at_its_own_load_balancer_with_health_evaluated(plans, stack) -> None:
    plan = plans[stack]
    record = _latency(plan)
    switch = plan.one("aws:route53/healthCheck:HealthCheck")
    (alias,) = record.inputs["aliases"]
    assert record.inputs["name"] == GLOBAL and record.inputs["type"] == "A"
    assert record.inputs["setIdentifier"] == plan.region
    assert record.inputs["latencyRoutingPolicies"] == [{"region": plan.region}]
    # this region's ALB: the host name the Ingress status gives, in this region
    assert alias["name"] == plan.outputs["inference"]["loadBalancer"]
    assert alias["name"].endswith(f".{plan.region}.elb.amazonaws.com")
    assert alias["evaluateTargetHealth"] is True
    # the ALBs' zone of this region, asked of the provider for this region
    zone_calls = [a for t, a in plan.calls if t == "aws:lb/getHostedZoneId:getHostedZoneId"]
    assert zone_calls == [{"loadBalancerType": "application", "region": plan.region}]
    assert alias["zoneId"] == {"ap-east-1": "Z3DQVH9N71FHZ0", "ap-southeast-1": "Z1LMS91P8CMLE5"}[plan.region]
    # the drain switch is the record's health check: serving until aiplat rollout clears its inversion, and
    # `pulumi up` leaves the inversion alone
    assert record.property_dependencies["healthCheckId"] == [switch.urn]
    # always unhealthy by itself (threshold 1, no children), created inverted: serving; never a threshold of
    # 0, which older terraform-provider-aws releases dropped (hashicorp/terraform-provider-aws#44004)
    assert switch.inputs["type"] == "CALCULATED" and switch.inputs["childHealthThreshold"] == 1
    assert switch.inputs["childHealthchecks"] == [] and switch.inputs["invertHealthcheck"] is True
    assert switch.options.get("ignoreChanges") == ["invertHealthcheck"]
    assert plan.outputs["globalEndpoint"]["setIdentifier"] == plan.region
    # the regional name stays, pointing at the same ALB
    (regional,) = [
        r for r in plan.by_type(RECORD) if r.inputs.get("type") == "CNAME" and "_" not in r.inputs["name"]
    ]
    assert regional.inputs["name"] != GLOBAL and regional.inputs["records"] == [alias["name"]]


@pytest.mark.parametrize("stack", INFER)
def test_each_region_serves_the_global_name_with_its_own_certificate(plans, stack) -> None:
    plan = plans[stack]
    certs = {r.inputs["domainName"]: r for r in plan.by_type("aws:acm/certificate:Certificate")}
    assert GLOBAL in certs and len(certs) == 2
    ingress = plan.one("kubernetes:networking.k8s.io/v1:Ingress")
    hosts = [rule["host"] for rule in ingress.inputs["spec"]["rules"]]
    assert hosts[1:] == [GLOBAL] and hosts[0] != GLOBAL
    assert ingress.inputs["spec"]["rules"][1]["http"] == ingress.inputs["spec"]["rules"][0]["http"]
    arns = ingress.inputs["metadata"]["annotations"]["alb.ingress.kubernetes.io/certificate-arn"].split(",")
    assert len(arns) == 2 and all(f":acm:{plan.region}:" in a for a in arns)


def test_the_validation_record_of_the_global_name_is_declared_once(plans) -> None:
    declared = {
        stack: [r for r in plan.by_type(RECORD) if r.inputs["name"].rstrip(".").endswith("." + GLOBAL)]
        for stack, plan in plans.items()
    }
    assert {s: len(rs) for s, rs in declared.items()} == {"prod-hk-infer": 1, "prod-sg-infer": 0}
    (owner_record,) = declared["prod-hk-infer"]
    hk_wait = [
        r
        for r in plans["prod-hk-infer"].by_type("aws:acm/certificateValidation:CertificateValidation")
        if r.name.startswith("global-")
    ]
    sg_wait = [
        r
        for r in plans["prod-sg-infer"].by_type("aws:acm/certificateValidation:CertificateValidation")
        if r.name.startswith("global-")
    ]
    assert hk_wait[0].inputs["validationRecordFqdns"] == [owner_record.inputs["name"].rstrip(".")]
    # the other region waits for ACM to see the owner's record: no record of its own
    assert "validationRecordFqdns" not in sg_wait[0].inputs
