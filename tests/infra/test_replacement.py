"""Every resource with a fixed physical name is deleted before its replacement is created.

Pulumi's default is create-then-delete; with a name we chose, the new resource cannot be created while the
old one holds the name ("already exists"). The plan records the options the engine acts on; every
fixed-name resource in every plan (stacks/ and examples/) must carry deleteBeforeReplace.
"""

from __future__ import annotations

import pytest

from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS

# Resource type -> the input that holds the physical name we choose (absent: auto-named by the engine).
NAME_FIELDS = {
    "aws:iam/role:Role": "name",
    "aws:iam/policy:Policy": "name",
    "aws:s3/bucket:Bucket": "bucket",
    "aws:kms/alias:Alias": "name",
    "aws:cloudwatch/logGroup:LogGroup": "name",
    "aws:ecr/repository:Repository": "name",
    "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate": "prefix",
    "aws:ec2/placementGroup:PlacementGroup": "name",
    "aws:ec2/launchTemplate:LaunchTemplate": "name",
    "aws:eks/cluster:Cluster": "name",
    "aws:eks/nodeGroup:NodeGroup": "nodeGroupName",
    "aws:eks/accessPolicyAssociation:AccessPolicyAssociation": "policyArn",
    "aws:cloudtrail/trail:Trail": "name",
    "aws:cloudwatch/eventRule:EventRule": "name",
    "aws:sns/topic:Topic": "name",
    "aws:ssm/document:Document": "name",
}


@pytest.fixture(scope="module")
def every_plan(plan_stack, plan_example) -> dict[str, Plan]:
    plans = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    plans.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return plans


def test_fixed_names_are_deleted_before_replacement(every_plan) -> None:
    missing, seen = [], set()
    for stack, plan in every_plan.items():
        for r in plan.resources:
            field = NAME_FIELDS.get(r.type)
            if field and r.inputs.get(field):
                seen.add(r.type)
                if not r.options.get("deleteBeforeReplace"):
                    missing.append(f"{stack}: {r.type} {r.name} ({r.inputs[field]})")
    assert not missing, "\n".join(missing)
    # the shipped stacks do have such resources (the test is not vacuous)
    assert {"aws:eks/nodeGroup:NodeGroup", "aws:eks/cluster:Cluster", "aws:iam/role:Role"} <= seen
    assert "aws:ec2/placementGroup:PlacementGroup" in seen


def test_auto_named_resources_keep_create_before_delete(every_plan) -> None:
    # Auto-named roles (pod roles, flow logs) get a fresh name on replacement: no outage needed.
    plan = every_plan["stacks/prod-us-train"]
    flow = plan.one("aws:iam/role:Role", "network-flow-logs-role")
    assert "name" not in flow.inputs and flow.options["deleteBeforeReplace"] is False
