"""Issue 24 on every plan (stacks/ and examples/): IAM documents that grant what they claim, key guards
nobody but break-glass can rewrite, narrowed upstream permissions, admission policies in the cluster.

Each test is a line of docs/platform/security.md, checked on what the real program registered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _statements(r: RecordedResource, key: str = "policy") -> list[dict[str, Any]]:
    return json.loads(r.inputs[key])["Statement"]


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def _resources(statement: dict[str, Any]) -> list[str]:
    res = statement.get("Resource", [])
    return [res] if isinstance(res, str) else list(res)


# -- item 7: IAM documents that grant what they claim ---------------------------------------------------

# Actions that have no resource-level permission: a statement naming them must have Resource "*", or AWS
# never grants them (Service Authorization Reference, "Resource types" column empty).
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazoncloudwatchlogs.html
STAR_ONLY = {"logs:DescribeLogGroups"}
# Actions whose requests carry no s3:prefix: a statement granting them under an s3:prefix condition never
# matches (the key is absent, StringLike on an absent key is false).
# https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html
NO_PREFIX_KEY = {"s3:ListBucketMultipartUploads"}


def _role_policies(plan: Plan) -> list[RecordedResource]:
    return plan.by_type("aws:iam/rolePolicy:RolePolicy") + plan.by_type("aws:iam/policy:Policy")


@pytest.mark.parametrize("stack", ALL)
def test_star_only_actions_are_granted_on_star(plans, stack: str) -> None:
    seen = []
    for doc in _role_policies(plans[stack]):
        for st in _statements(doc):
            for action in set(_actions(st)) & STAR_ONLY:
                if st["Effect"] == "Allow":
                    seen.append(doc.name)
                    assert _resources(st) == ["*"], (doc.name, action, st)
    assert "network-flow-logs-policy" in seen


@pytest.mark.parametrize("stack", ALL)
def test_no_action_under_a_condition_key_its_request_lacks(plans, stack: str) -> None:
    seen = []
    for doc in _role_policies(plans[stack]):
        for st in _statements(doc):
            for action in set(_actions(st)) & NO_PREFIX_KEY:
                seen.append(doc.name)
                keys = {k for cond in st.get("Condition", {}).values() for k in cond}
                assert "s3:prefix" not in keys, (doc.name, action, st)
    trains = plans[stack].config["role"] == "train" and plans[stack].config["storage"]["backend"] == "s3"
    assert bool(seen) == trains  # the trainer and the publisher list their multipart uploads


def _urn_of(plan: Plan, type_: str, name: str) -> str:
    return plan.one(type_, name).urn


@pytest.mark.parametrize("stack", ALL)
def test_flow_log_waits_for_its_role_policy(plans, stack: str) -> None:
    plan = plans[stack]
    flow = plan.one("aws:ec2/flowLog:FlowLog")
    policy = _urn_of(plan, "aws:iam/rolePolicy:RolePolicy", "network-flow-logs-policy")
    # without it, CreateFlowLogs may run before the role can write and the first deliveries fail
    assert policy in flow.dependencies


@pytest.mark.parametrize("stack", ALL)
def test_key_events_target_waits_for_the_topic_policy(plans, stack: str) -> None:
    plan = plans[stack]
    target = plan.one("aws:cloudwatch/eventTarget:EventTarget", "keyguard-key-events-topic")
    policy = _urn_of(plan, "aws:sns/topicPolicy:TopicPolicy", "keyguard-alerts-policy")
    assert policy in target.dependencies
