"""No two stacks (stacks/ and examples/ together) create a resource under the same physical name where AWS
keeps names unique per account or partition (IAM, S3, multi-region trails) or per account and region
(clusters, log groups, KMS aliases, ...), and no two stacks own the same per-region account setting.

A duplicate is a `pulumi up` that fails with EntityAlreadyExists / BucketAlreadyOwnedByYou /
ResourceAlreadyExistsException, or two stacks fighting over one setting. Auto-named resources (no name in
the inputs: the engine adds a random suffix) cannot collide and are skipped.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

Key = tuple[str, ...]


def _region(plan: Plan, r: RecordedResource) -> str:
    return r.inputs.get("region") or plan.region


def _named(field: str, scope: str) -> Callable[[Plan, RecordedResource], Key | None]:
    """The key of a resource whose physical name is ``inputs[field]``, unique per ``scope``."""

    def key(plan: Plan, r: RecordedResource) -> Key | None:
        name = r.inputs.get(field)
        if not name:
            return None  # auto-named
        where = "account" if scope == "account" else "partition" if scope == "partition" else _region(plan, r)
        return (where, r.type, str(name))

    return key


def _trail(plan: Plan, r: RecordedResource) -> Key:
    # A multi-region trail has a shadow copy of the same name in every region: account-wide.
    where = "account" if r.inputs.get("isMultiRegionTrail") else _region(plan, r)
    return (where, r.type, r.inputs["name"])


def _singleton(plan: Plan, r: RecordedResource) -> Key:
    """One per account and region: a second owner would fight over (or destroy) the first one's setting."""
    return (_region(plan, r), r.type, "(singleton)")


def _nodegroup(plan: Plan, r: RecordedResource) -> Key | None:
    if not r.inputs.get("nodeGroupName"):
        return None
    return (_region(plan, r), r.type, r.inputs["clusterName"], r.inputs["nodeGroupName"])


def _event_rule(plan: Plan, r: RecordedResource) -> Key | None:
    if not r.inputs.get("name"):
        return None
    return (_region(plan, r), r.type, r.inputs.get("eventBusName") or "default", r.inputs["name"])


def _dns_record(plan: Plan, r: RecordedResource) -> Key:
    # A record set is unique per hosted zone (global, not per region), name and type.
    return (
        "account",
        r.type,
        str(r.inputs.get("zoneId")),
        str(r.inputs.get("name")),
        str(r.inputs.get("type")),
    )


# Type -> how its physical name is scoped. Scopes from the APIs' own words (research-aws-constraints §9):
# IAM names are unique in the account, bucket names in the partition, the rest per account and region.
KEYS: dict[str, Callable[[Plan, RecordedResource], Key | None]] = {
    "aws:iam/role:Role": _named("name", "account"),
    "aws:iam/policy:Policy": _named("name", "account"),
    "aws:iam/instanceProfile:InstanceProfile": _named("name", "account"),
    "aws:iam/openIdConnectProvider:OpenIdConnectProvider": _named("url", "account"),
    "aws:iam/serviceLinkedRole:ServiceLinkedRole": _named("awsServiceName", "account"),
    "aws:s3/bucket:Bucket": _named("bucket", "partition"),
    "aws:cloudtrail/trail:Trail": _trail,
    "aws:kms/alias:Alias": _named("name", "region"),
    "aws:cloudwatch/logGroup:LogGroup": _named("name", "region"),
    "aws:ecr/repository:Repository": _named("name", "region"),
    "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": _named("prefix", "region"),
    "aws:ec2/placementGroup:PlacementGroup": _named("name", "region"),
    "aws:ec2/launchTemplate:LaunchTemplate": _named("name", "region"),
    "aws:eks/cluster:Cluster": _named("name", "region"),
    "aws:eks/nodeGroup:NodeGroup": _nodegroup,
    "aws:cloudwatch/eventRule:EventRule": _event_rule,
    "aws:sns/topic:Topic": _named("name", "region"),
    "aws:sqs/queue:Queue": _named("name", "region"),
    "aws:ssm/document:Document": _named("name", "region"),
    # regional web ACLs: unique per account, region and scope (API_CreateWebACL)
    "aws:wafv2/webAcl:WebAcl": _named("name", "region"),
    "aws:route53/record:Record": _dns_record,
    "aws:ecr/replicationConfiguration:ReplicationConfiguration": _singleton,
    "aws:ebs/encryptionByDefault:EncryptionByDefault": _singleton,
    "aws:ebs/defaultKmsKey:DefaultKmsKey": _singleton,
    "aws:guardduty/detector:Detector": _singleton,
}
# Types with a 'name' input that is not a physical name unique in an account or region.
NOT_NAMES = {
    "aws:eks/accessEntry:AccessEntry",  # keyed by principal, per cluster
}


@pytest.fixture(scope="module")
def every_plan(plan_stack, plan_example) -> dict[str, Plan]:
    plans = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    plans.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return plans


def test_no_global_name_is_used_twice(every_plan) -> None:
    owners: dict[Key, list[str]] = defaultdict(list)
    for stack, plan in every_plan.items():
        for r in plan.resources:
            key_of = KEYS.get(r.type)
            key = key_of(plan, r) if key_of else None
            if key is not None:
                owners[key].append(f"{stack}:{r.name}")
    dupes = {k: v for k, v in owners.items() if len(v) > 1}
    assert not dupes, "\n".join(f"{k}: {v}" for k, v in sorted(dupes.items()))
    # the check saw the names it is about
    scopes = {k[0] for k in owners}
    assert {"account", "partition"} <= scopes


def test_every_named_type_is_classified(every_plan) -> None:
    """A new resource type with a physical name must be added to KEYS (or NOT_NAMES) above."""
    unknown = {
        r.type
        for plan in every_plan.values()
        for r in plan.resources
        if r.type.startswith("aws:")
        and ("name" in r.inputs or "nodeGroupName" in r.inputs)
        and r.type not in KEYS
        and r.type not in NOT_NAMES
    }
    assert not unknown, sorted(unknown)


def test_iam_role_names_carry_the_region(every_plan) -> None:
    from infra.model.naming import region_code

    for plan in every_plan.values():
        for r in plan.by_type("aws:iam/role:Role"):
            if r.inputs.get("name"):
                assert f"-{region_code(plan.region)}-" in r.inputs["name"], r.inputs["name"]


def test_trails_fit_the_per_region_quota(every_plan) -> None:
    # "5 trails per region" (a multi-region trail counts in every region); more makes CreateTrail fail
    # with MaximumNumberOfTrailsExceededException. https://docs.aws.amazon.com/awscloudtrail/latest/userguide/WhatIsCloudTrail-Limits.html
    trails = [
        (stack, r.inputs["name"])
        for stack, plan in every_plan.items()
        for r in plan.by_type("aws:cloudtrail/trail:Trail")
    ]
    assert 1 <= len(trails) <= 5, trails
