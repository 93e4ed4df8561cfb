"""AWS's size quotas on policy documents, measured on what the stacks deploy: the plan refuses a document
AWS would refuse, and the pack's policy-documents-within-quotas says the same (one source, two users)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.core import policy_quotas as q
from infra.core.errors import ConfigErrors
from infra.plan.runner import Plan, quota_errors, refuse_over_quota
from infra.services.documents import lbc_iam
from tests.conftest import EXAMPLES, STACKS

ACCOUNT = "123456789012"


def _urn(type_: str, name: str) -> str:
    return f"urn:pulumi:s::aiplat::{type_}::{name}"


def _reg(type_: str, name: str, inputs: dict[str, Any], **deps: str) -> q.Registered:
    return q.Registered(
        _urn(type_, name), type_, name, inputs, {k: [_urn(q.ROLE, v)] for k, v in deps.items()}
    )


def _lbc_single_document() -> dict[str, Any]:
    """The controller's policy as every stack deployed it before the split: one managed policy."""
    return lbc_iam.scoped_policy(cluster_name="aiplat-prod-train", region="us-east-1", account_id=ACCOUNT)


def _trust(principals: int) -> dict[str, Any]:
    arns = [f"arn:aws:iam::{ACCOUNT}:role/aiplat-prod-operator-{i:03d}" for i in range(principals)]
    return {
        "Version": "2012-10-17",
        "Statement": [{"Effect": "Allow", "Principal": {"AWS": arns}, "Action": "sts:AssumeRole"}],
    }


def _statements(n: int, width: int = 200) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": f"S{i}",
                "Effect": "Allow",
                "Principal": {"AWS": f"arn:aws:iam::{ACCOUNT}:root"},
                "Action": "kms:Decrypt",
                "Resource": "*",
                "Condition": {"StringEquals": {"kms:EncryptionContext:purpose": "x" * width}},
            }
            for i in range(n)
        ],
    }


def test_iam_counts_characters_without_white_space_and_kms_s3_count_bytes() -> None:
    doc = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:GetObject"}]}
    pretty = json.dumps(doc, indent=4)
    assert q.iam_size(pretty) == q.iam_size(json.dumps(doc, separators=(",", ":"))) < len(pretty)
    assert q.byte_size(pretty) == len(pretty.encode())


def test_the_single_lbc_policy_every_stack_deployed_is_refused_and_its_two_parts_pass() -> None:
    single = _lbc_single_document()
    (over,) = q.over_quota([_reg(q.MANAGED_POLICY, "lbc-iam-policy", {"policy": json.dumps(single)})])
    assert over.resource == "lbc-iam-policy" and over.limit == q.MANAGED_POLICY_CHARS
    assert over.size == q.iam_size(json.dumps(single)) > q.MANAGED_POLICY_CHARS
    assert "split its statements into two managed policies" in over.fix
    parts = lbc_iam.scoped_policies(cluster_name="aiplat-prod-train", region="us-east-1", account_id=ACCOUNT)
    assert [st for part in parts.values() for st in part["Statement"]] == single["Statement"]
    registered = [_reg(q.MANAGED_POLICY, f"lbc-{p}", {"policy": json.dumps(d)}) for p, d in parts.items()]
    assert q.over_quota(registered) == []


def test_an_inflated_trust_policy_is_refused_naming_the_role_and_the_fix() -> None:
    small, big = _trust(20), _trust(60)
    assert q.iam_size(json.dumps(small)) < q.ROLE_TRUST_POLICY_CHARS < q.iam_size(json.dumps(big))
    assert q.over_quota([_reg(q.ROLE, "ops", {"assumeRolePolicy": json.dumps(small)})]) == []
    (over,) = q.over_quota([_reg(q.ROLE, "ops", {"assumeRolePolicy": json.dumps(big)})])
    assert over.resource == "ops" and over.what == "the trust policy (assumeRolePolicy)"
    expected = f"is {over.size:,} characters without white space; AWS allows at most 2,048"
    assert over.problem() == f"the trust policy (assumeRolePolicy) {expected}"


def test_an_inflated_key_policy_and_bucket_policy_are_refused() -> None:
    key = _statements(120)
    assert q.byte_size(json.dumps(key)) > q.KEY_POLICY_BYTES
    bucket = _statements(80)
    assert q.BUCKET_POLICY_BYTES < q.byte_size(json.dumps(bucket)) < q.KEY_POLICY_BYTES
    found = q.over_quota(
        [
            _reg("aws:kms/key:Key", "kms-data", {"policy": json.dumps(key)}),
            _reg("aws:kms/key:Key", "kms-logs", {"policy": json.dumps(bucket)}),  # under the key quota
            _reg(q.BUCKET_POLICY, "storage-artifacts-policy", {"policy": json.dumps(bucket)}),
        ]
    )
    assert [(o.resource, o.limit, o.unit) for o in found] == [
        ("kms-data", 32768, "bytes"),
        ("storage-artifacts-policy", 20480, "bytes"),
    ]


def test_a_roles_inline_policies_count_together_and_attachments_are_counted() -> None:
    doc = json.dumps(_statements(12, width=180))  # ~3.4k characters each: three of them pass one by one
    assert q.iam_size(doc) < q.MANAGED_POLICY_CHARS < 3 * q.iam_size(doc)
    role = _reg(q.ROLE, "trainer", {"inlinePolicies": [{"name": "a", "policy": doc}]})
    inline = [_reg(q.ROLE_POLICY, f"trainer-{i}", {"policy": doc}, role="trainer") for i in range(2)]
    (over,) = q.over_quota([role, *inline])
    assert over.resource == "trainer" and over.what == "the role's 3 inline policies together"
    assert q.over_quota([role, inline[0]]) == []
    attach = [
        _reg(
            q.ROLE_POLICY_ATTACHMENT,
            f"trainer-a{i}",
            {"policyArn": f"arn:aws:iam::aws:policy/P{i}"},
            role="trainer",
        )
        for i in range(11)
    ]
    (over,) = q.over_quota([role, *attach])
    assert (over.resource, over.size, over.limit) == ("trainer", 11, 10)


def test_every_shipped_stack_and_example_plans_within_the_quotas(plan_stack, plan_example) -> None:
    plans = [plan_stack(s) for s in STACKS] + [plan_example(e) for e in EXAMPLES]
    assert {p.stack: quota_errors(p) for p in plans} == {p.stack: [] for p in plans}
    # what is measured: every stack declares managed policies, roles, key and bucket policies
    measured = {t for p in plans for r in p.resources for t in [r.type]}
    assert {q.MANAGED_POLICY, q.ROLE, q.ROLE_POLICY, "aws:kms/key:Key", q.BUCKET_POLICY} <= measured


def test_a_plan_with_todays_lbc_policy_is_refused_as_a_config_error(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    resources = [r for r in plan.resources if not r.name.startswith("lbc-iam-policy")]
    (ec2,) = [r for r in plan.resources if r.name == "lbc-iam-policy"]
    inflated = type(ec2)(
        **{**ec2.__dict__, "inputs": {**ec2.inputs, "policy": json.dumps(_lbc_single_document())}}
    )
    bad = Plan(**{**plan.__dict__, "resources": [*resources, inflated]})
    with pytest.raises(ConfigErrors) as raised:
        refuse_over_quota(bad)
    (line,) = str(raised.value).splitlines()
    assert "aws:iam/policy:Policy 'lbc-iam-policy'" in line and "AWS allows at most 6,144" in line
    assert "split its statements" in line
