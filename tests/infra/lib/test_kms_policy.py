"""Key policies: the account stays in control, services get only what they need, no wildcard principal."""

from __future__ import annotations

import pytest

from infra.lib.kms_policy import KeyPurpose, key_policy

ARGS = {"partition": "aws", "account_id": "111122223333", "region": "us-east-1"}


def _principals(policy: dict) -> list[object]:
    return [s["Principal"] for s in policy["Statement"]]


@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_account_root_administers_and_no_wildcards(purpose: KeyPurpose) -> None:
    policy = key_policy(purpose, **ARGS)
    first = policy["Statement"][0]
    assert first["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"} and first["Action"] == ["kms:*"]
    for principal in _principals(policy):
        assert principal != "*"
        for value in principal.values():
            assert "*" not in value


@pytest.mark.parametrize(
    ("purpose", "sids"),
    [
        (KeyPurpose.data, {"AccountAdministers"}),
        (KeyPurpose.eks, {"AccountAdministers"}),
        (KeyPurpose.ebs, {"AccountAdministers", "AutoScalingUsesKey", "AutoScalingAttachesVolumes"}),
        (KeyPurpose.logs, {"AccountAdministers", "CloudWatchLogsUsesKey"}),
    ],
)
def test_statements_per_purpose(purpose: KeyPurpose, sids: set[str]) -> None:
    assert {s["Sid"] for s in key_policy(purpose, **ARGS)["Statement"]} == sids


def test_ebs_key_grants_autoscaling_service_linked_role() -> None:
    statements = {s["Sid"]: s for s in key_policy(KeyPurpose.ebs, **ARGS)["Statement"]}
    slr = (
        "arn:aws:iam::111122223333:role/aws-service-role/"
        "autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
    )
    assert statements["AutoScalingUsesKey"]["Principal"] == {"AWS": slr}
    grant = statements["AutoScalingAttachesVolumes"]
    assert grant["Action"] == ["kms:CreateGrant"]
    assert grant["Condition"] == {"Bool": {"kms:GrantIsForAWSResource": "true"}}


def test_logs_key_is_scoped_to_the_accounts_log_groups() -> None:
    stmt = key_policy(KeyPurpose.logs, partition="aws-cn", account_id="1", region="cn-north-1")["Statement"][
        1
    ]
    assert stmt["Principal"] == {"Service": "logs.cn-north-1.amazonaws.com"}
    assert (
        stmt["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"] == "arn:aws-cn:logs:cn-north-1:1:*"
    )
