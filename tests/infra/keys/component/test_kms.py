"""KmsKeys in every stack's plan: four keys with rotation, aliases, and policies for the stack's account."""

from __future__ import annotations

import json
from fnmatch import fnmatchcase

import pytest

from infra.plan.mocks import ACCOUNT_ID
from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_keys_per_purpose(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    component = plan.one("aiplat:kms:KmsKeys")
    # the component's own keys (train stacks also hold replica keys of the inference regions)
    keys = {r.name: r for r in plan.by_type("aws:kms/key:Key") if r.parent == component.urn}
    assert set(keys) == {"kms-data", "kms-eks", "kms-ebs", "kms-logs"}
    for key in keys.values():
        assert key.parent == component.urn
        assert key.inputs["enableKeyRotation"] is True
        assert key.inputs["deletionWindowInDays"] == 30
        policy = json.loads(key.inputs["policy"])
        assert policy["Statement"][0]["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT_ID}:root"}
    logs_policy = {s["Sid"]: s for s in json.loads(keys["kms-logs"].inputs["policy"])["Statement"]}
    logs = logs_policy["CloudWatchLogsUsesKey"]
    assert logs["Principal"] == {"Service": f"logs.{plan.region}.amazonaws.com"}
    # narrowed to the stack's own log groups (control plane, flow logs, sessions, the container groups under
    # one pattern), found in the plan: each is matched, and the patterns match nothing else
    groups = sorted(
        f"arn:aws:logs:{plan.region}:{ACCOUNT_ID}:log-group:{g.inputs['name']}"
        for g in plan.by_type("aws:cloudwatch/logGroup:LogGroup")
    )
    patterns = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert all(any(fnmatchcase(g, p) for p in patterns) for g in groups)
    assert all(any(fnmatchcase(g, p) for g in groups) for p in patterns)
    assert len(patterns) < len(groups)  # the container groups, one per namespace, are one pattern
    aliases = sorted(
        r.inputs["name"] for r in plan.by_type("aws:kms/alias:Alias") if r.parent == component.urn
    )
    prefix = f"alias/aiplat-{plan.config['environment']}-{plan.config['role']}"
    assert aliases == sorted(f"{prefix}-{p}" for p in ("data", "ebs", "eks", "logs"))
    assert set(plan.outputs["kmsKeyArns"]) == {"data", "eks", "ebs", "logs"}


@pytest.mark.parametrize("stack", STACKS)
def test_fresh_and_existing_accounts_both_deploy(plan_stack, stack: str) -> None:
    # Fresh account: no key policy names the Auto Scaling service-linked role as a principal (CreateKey
    # would fail). Account that has the role: nothing creates it (CreateServiceLinkedRole would fail with
    # "Service role name AWSServiceRoleForAutoScaling has been taken in this account").
    plan = plan_stack(stack)
    assert not plan.by_type("aws:iam/serviceLinkedRole:ServiceLinkedRole")
    for key in plan.by_type("aws:kms/key:Key"):
        for st in json.loads(key.inputs["policy"])["Statement"]:
            assert "aws-service-role" not in json.dumps(st["Principal"]), (key.name, st["Sid"])
