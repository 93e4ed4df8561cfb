"""Key policies: the account stays in control, services get only what they need, every wildcard principal
is bound to one principal of the account, and no principal that may not exist yet is named."""

from __future__ import annotations

import pytest

from infra.lib.kms_policy import KeyPurpose, key_policy

ARGS = {"partition": "aws", "account_id": "111122223333", "region": "us-east-1"}


def _principals(policy: dict) -> list[object]:
    return [s["Principal"] for s in policy["Statement"]]


SLR = "arn:aws:iam::111122223333:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"


@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_account_root_administers_and_wildcards_are_bound(purpose: KeyPurpose) -> None:
    policy = key_policy(purpose, **ARGS)
    first = policy["Statement"][0]
    assert first["Principal"] == {"AWS": "arn:aws:iam::111122223333:root"} and first["Action"] == ["kms:*"]
    for st in policy["Statement"]:
        principal = st["Principal"]
        assert principal != "*"
        if principal == {"AWS": "*"} and st["Effect"] == "Allow":
            # one principal, of our account: the pattern of AWS's EBS managed key policy
            assert st["Condition"]["StringEquals"]["kms:CallerAccount"] == "111122223333"
            assert st["Condition"]["ArnEquals"]["aws:PrincipalArn"].startswith("arn:aws:iam::111122223333:")
        else:
            for value in principal.values():
                assert "*" not in value


@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_no_principal_that_a_fresh_account_lacks(purpose: KeyPurpose) -> None:
    # CreateKey refuses principals that do not exist; the Auto Scaling service-linked role exists only
    # after the account's first Auto Scaling group (MalformedPolicyDocumentException in a fresh account).
    for principal in _principals(key_policy(purpose, **ARGS)):
        values = principal.values() if isinstance(principal, dict) else [principal]
        assert not any("aws-service-role" in str(v) for v in values), principal


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


def test_ebs_key_grants_autoscaling_service_linked_role_by_condition() -> None:
    # The two statements of the Auto Scaling guide (key-policy-requirements-EBS-encryption.html), with the
    # role in aws:PrincipalArn instead of Principal: valid before and after the role exists.
    statements = {s["Sid"]: s for s in key_policy(KeyPurpose.ebs, **ARGS)["Statement"]}
    use = statements["AutoScalingUsesKey"]
    assert use["Principal"] == {"AWS": "*"}
    assert use["Action"] == [
        "kms:Encrypt",
        "kms:Decrypt",
        "kms:ReEncrypt*",
        "kms:GenerateDataKey*",
        "kms:DescribeKey",
    ]
    assert use["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": SLR},
        "StringEquals": {"kms:CallerAccount": "111122223333"},
    }
    grant = statements["AutoScalingAttachesVolumes"]
    assert grant["Principal"] == {"AWS": "*"} and grant["Action"] == ["kms:CreateGrant"]
    assert grant["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": SLR},
        "StringEquals": {"kms:CallerAccount": "111122223333"},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
    }


def test_logs_key_is_scoped_to_the_accounts_log_groups() -> None:
    stmt = key_policy(KeyPurpose.logs, partition="aws-cn", account_id="1", region="cn-north-1")["Statement"][
        1
    ]
    assert stmt["Principal"] == {"Service": "logs.cn-north-1.amazonaws.com"}
    assert (
        stmt["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"] == "arn:aws-cn:logs:cn-north-1:1:*"
    )
