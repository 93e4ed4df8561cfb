"""No two stacks (stacks/ and examples/ together) create a resource under the same physical name where AWS
keeps names unique per account or partition (IAM, S3, multi-region trails) or per account and region
(clusters, log groups, KMS aliases, ...), and no two stacks own the same per-region account setting: the
check ``aiplat plan`` makes within one stacks folder (``infra/plan/names.py``), across both folders.
"""

from __future__ import annotations

import pytest

from infra.plan.names import ACCOUNT, PARTITION, name_clashes, physical_names, unclassified_types
from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS


@pytest.fixture(scope="module")
def every_plan(plan_stack, plan_example) -> dict[str, Plan]:
    plans = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    plans.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return plans


def test_no_global_name_is_used_twice(every_plan) -> None:
    # the check aiplat plan makes within one folder, here across both folders
    clashes = [f.one_line() for stack in every_plan for f in name_clashes(stack, every_plan)]
    assert not clashes, "\n".join(clashes)
    # the check saw the names it is about
    scopes = {name.scope for plan in every_plan.values() for name, _ in physical_names(plan)}
    assert {ACCOUNT, PARTITION} <= scopes


def test_every_named_type_is_classified(every_plan) -> None:
    """A new resource type with a physical name must be added to NAMES (or NOT_NAMES) of infra/plan/names."""
    unknown = unclassified_types(every_plan.values())
    assert not unknown, sorted(unknown)


def test_iam_role_names_carry_the_region(every_plan) -> None:
    from infra.core.naming import region_code

    for plan in every_plan.values():
        for r in plan.by_type("aws:iam/role:Role"):
            if r.inputs.get("name"):
                assert f"-{region_code(plan.region)}-" in r.inputs["name"], r.inputs["name"]


def test_trails_fit_the_per_region_quota(every_plan) -> None:
    # "5 trails per region" (a multi-region trail counts in every region); more makes CreateTrail fail
    # with MaximumNumberOfTrailsExceededException.
    # https://docs.aws.amazon.com/awscloudtrail/latest/userguide/WhatIsCloudTrail-Limits.html
    trails = [
        (stack, r.inputs["name"])
        for stack, plan in every_plan.items()
        for r in plan.by_type("aws:cloudtrail/trail:Trail")
    ]
    assert 1 <= len(trails) <= 5, trails


def test_dns_records_are_keyed_by_zone_name_type_and_set_identifier(every_plan) -> None:
    """The latency records of the global endpoint share a name and type across stacks (one per region,
    told apart by the set identifier) and are no clash; the certificate validation record of the global
    name, which ACM asks every region for, would be one if a second stack declared it."""
    records = {
        stack: [n for n, r in physical_names(plan) if r.type == "aws:route53/record:Record"]
        for stack, plan in every_plan.items()
    }
    latency = {n.parts for names in records.values() for n in names if n.parts[3]}
    assert {p[1:3] for p in latency} == {("api.inference.example.com", "A")}
    assert {p[3] for p in latency} == {"ap-east-1", "ap-southeast-1"}
    validation = [
        (stack, n.parts)
        for stack, names in records.items()
        for n in names
        if n.parts[1].endswith(".api.inference.example.com")
    ]
    assert [stack for stack, _ in validation] == ["stacks/prod-hk-infer"]
    # the same records declared by a second stack (a copy of the owner's plan) are refused, validation
    # record included
    owner = every_plan["stacks/prod-hk-infer"]
    clashes = name_clashes("a", {"a": owner, "b": owner})
    (dns,) = [f for f in clashes if f.field.startswith("aws:route53/record:Record")]
    assert "also declared by stack b" in dns.problem
    # every record of the owner counts, the global name's validation record among them
    assert validation[0][1] in {n.parts for n in records["stacks/prod-hk-infer"]}
    assert f"{len(records['stacks/prod-hk-infer'])} names (unique in the account)" in dns.problem


def test_pull_through_cache_rules_of_one_account_and_region_do_not_share_a_prefix(every_plan) -> None:
    """ECR keeps a pull through cache rule's repository prefix unique per account and region: each stack's
    rules carry its own prefix (no clash above), and a second stack with the same prefix is refused."""
    rule = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
    owner = every_plan["stacks/prod-us-train"]
    prefixes = [n.parts[0] for n, r in physical_names(owner) if r.type == rule]
    assert prefixes and all(p.startswith("aiplat-prod-train/") for p in prefixes), prefixes
    clashes = [f for f in name_clashes("a", {"a": owner, "b": owner}) if f.field.startswith(rule)]
    assert len(clashes) == 1 and "image_cache.prefix" in (clashes[0].fix or ""), clashes
