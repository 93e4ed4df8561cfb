"""Key policies: the account stays in control, services get only what they need, every wildcard principal
is bound by conditions, no principal that may not exist yet is named, key administrators never use a key,
and only the break-glass role deletes a protected one."""

from __future__ import annotations

import dataclasses

import pytest

from infra.keys.documents.kms_policy import CRYPTO_ACTIONS, KeyAccess, KeyPurpose, key_policy

ACCOUNT = "111122223333"
ADMIN = f"arn:aws:iam::{ACCOUNT}:role/aiplat-prod-train-use1-key-admin"
GLASS = f"arn:aws:iam::{ACCOUNT}:role/aiplat-prod-train-use1-break-glass"
DEPLOYER = f"arn:aws:iam::{ACCOUNT}:role/aiplat-deploy"
GROUPS = (f"arn:aws:logs:us-east-1:{ACCOUNT}:log-group:/aws/eks/c/cluster",)
TRAIL = f"arn:aws:cloudtrail:us-east-1:{ACCOUNT}:trail/aiplat-prod-train-use1-trail"
DATASETS = "arn:aws:s3:::aiplat-prod-us-east-1-datasets"
FSX_ROLES = (
    f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
    "AWSServiceRoleForFSxS3Access_fs-*"
)
ACCESS = KeyAccess(partition="aws", account_id=ACCOUNT, region="us-east-1")
FULL = dataclasses.replace(
    ACCESS,
    key_admin_role_arn=ADMIN,
    break_glass_role_arn=GLASS,
    deployer_role_arn=DEPLOYER,
    protect=True,
    log_group_arns=GROUPS,
    trail_arn=TRAIL,
    events_publish=True,
    fsx_linked_bucket_arns=(DATASETS,),
)
SLR = f"arn:aws:iam::{ACCOUNT}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"


def _principals(policy: dict) -> list[object]:
    return [s["Principal"] for s in policy["Statement"]]


def _sids(policy: dict) -> dict[str, dict]:
    return {s["Sid"]: s for s in policy["Statement"]}


@pytest.mark.parametrize("access", [ACCESS, FULL], ids=["plain", "full"])
@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_account_root_administers_and_wildcards_are_bound(purpose: KeyPurpose, access: KeyAccess) -> None:
    policy = key_policy(purpose, access)
    first = policy["Statement"][0]
    assert first["Principal"] == {"AWS": f"arn:aws:iam::{ACCOUNT}:root"} and first["Action"] == ["kms:*"]
    for st in policy["Statement"]:
        principal = st["Principal"]
        assert principal != "*"
        if principal == {"AWS": "*"}:
            if st["Effect"] == "Allow":
                # one principal of our account (the pattern of AWS's EBS managed key policy), or the FSx
                # service-linked roles of our account, whose names hold file system ids not known yet
                assert st["Condition"]["StringEquals"]["kms:CallerAccount"] == ACCOUNT
                if "ArnLike" in st["Condition"]:
                    assert st["Condition"]["ArnLike"] == {"aws:PrincipalArn": FSX_ROLES}
                else:
                    assert st["Condition"]["ArnEquals"]["aws:PrincipalArn"].startswith(
                        f"arn:aws:iam::{ACCOUNT}:"
                    )
            else:  # a Deny on everyone is bound to named principals too
                assert {"ArnEquals", "ArnNotEquals"} & set(st["Condition"]), st
        else:
            for value in principal.values():
                assert "*" not in value


@pytest.mark.parametrize("access", [ACCESS, FULL], ids=["plain", "full"])
@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_no_principal_that_a_fresh_account_lacks(purpose: KeyPurpose, access: KeyAccess) -> None:
    # CreateKey refuses principals that do not exist: the Auto Scaling service-linked role (it appears
    # with the account's first Auto Scaling group) and our own roles (created in the same stack) are named
    # only in conditions.
    for principal in _principals(key_policy(purpose, access)):
        values = principal.values() if isinstance(principal, dict) else [principal]
        assert not any(":role/" in str(v) for v in values), principal


LOGS_FULL = {
    "CloudWatchLogsUsesKey",
    "CloudTrailEncryptsLogs",
    "CloudTrailDescribesKey",
    "EventBridgePublishesAlerts",
}
AUTO_SCALING = {"AutoScalingUsesKey", "AutoScalingAttachesVolumes"}
GUARDS = {"KeyAdministratorsNeverUseKey", "OnlyBreakGlassDeletesKey", "OnlyBreakGlassAndDeployerChangePolicy"}


@pytest.mark.parametrize(
    ("purpose", "access", "sids"),
    [
        (KeyPurpose.data, ACCESS, set()),
        (KeyPurpose.data, FULL, GUARDS | {"FsxLinkedBucketsUseKey"}),
        (KeyPurpose.eks, FULL, GUARDS),
        (KeyPurpose.ebs, ACCESS, AUTO_SCALING),
        (KeyPurpose.ebs, FULL, GUARDS | AUTO_SCALING),
        (KeyPurpose.logs, ACCESS, {"CloudWatchLogsUsesKey"}),
        (KeyPurpose.logs, FULL, GUARDS | LOGS_FULL),
    ],
)
def test_statements_per_purpose(purpose: KeyPurpose, access: KeyAccess, sids: set[str]) -> None:
    assert set(_sids(key_policy(purpose, access))) == {"AccountAdministers"} | sids


def test_key_administrators_never_use_the_key() -> None:
    deny = _sids(key_policy(KeyPurpose.data, FULL))["KeyAdministratorsNeverUseKey"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert (
        set(deny["Action"])
        == set(CRYPTO_ACTIONS)
        >= {"kms:Decrypt", "kms:GenerateDataKey*", "kms:CreateGrant"}
    )
    assert deny["Condition"] == {"ArnEquals": {"aws:PrincipalArn": ADMIN}}


@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_only_break_glass_deletes_a_protected_key(purpose: KeyPurpose) -> None:
    deny = _sids(key_policy(purpose, FULL))["OnlyBreakGlassDeletesKey"]
    assert deny["Effect"] == "Deny" and deny["Principal"] == {"AWS": "*"}
    assert deny["Action"] == ["kms:ScheduleKeyDeletion", "kms:DisableKey"]
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": GLASS}}
    # unprotected (dev): no deny, `pulumi destroy` can schedule the deletion
    unprotected = dataclasses.replace(FULL, protect=False)
    assert "OnlyBreakGlassDeletesKey" not in _sids(key_policy(purpose, unprotected))


def test_protection_needs_a_break_glass_role() -> None:
    with pytest.raises(ValueError, match="break-glass"):
        key_policy(KeyPurpose.data, dataclasses.replace(ACCESS, protect=True))


def test_protection_needs_the_deployer_role() -> None:
    with pytest.raises(ValueError, match="deployer role"):
        key_policy(KeyPurpose.data, dataclasses.replace(FULL, deployer_role_arn=None))


@pytest.mark.parametrize("purpose", list(KeyPurpose))
def test_only_break_glass_and_the_deployer_change_the_policy(purpose: KeyPurpose) -> None:
    deny = _sids(key_policy(purpose, FULL))["OnlyBreakGlassAndDeployerChangePolicy"]
    assert (deny["Effect"], deny["Principal"], deny["Action"]) == ("Deny", {"AWS": "*"}, ["kms:PutKeyPolicy"])
    assert deny["Condition"] == {"ArnNotEquals": {"aws:PrincipalArn": [GLASS, DEPLOYER]}}
    unprotected = dataclasses.replace(FULL, protect=False)
    assert "OnlyBreakGlassAndDeployerChangePolicy" not in _sids(key_policy(purpose, unprotected))


def test_ebs_key_grants_autoscaling_service_linked_role_by_condition() -> None:
    # The two statements of the Auto Scaling guide (key-policy-requirements-EBS-encryption.html), with the
    # role in aws:PrincipalArn instead of Principal: valid before and after the role exists.
    statements = _sids(key_policy(KeyPurpose.ebs, ACCESS))
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
        "StringEquals": {"kms:CallerAccount": ACCOUNT},
    }
    grant = statements["AutoScalingAttachesVolumes"]
    assert grant["Principal"] == {"AWS": "*"} and grant["Action"] == ["kms:CreateGrant"]
    assert grant["Condition"] == {
        "ArnEquals": {"aws:PrincipalArn": SLR},
        "StringEquals": {"kms:CallerAccount": ACCOUNT},
        "Bool": {"kms:GrantIsForAWSResource": "true"},
    }


def test_data_key_lets_fsx_reach_the_linked_bucket_only_through_s3() -> None:
    # The FSx for Lustre guide's statement for a file system linked to an SSE-KMS bucket
    # (s3-server-side-encryption-support.html), the role by condition: it exists only once FSx links a file
    # system; the bucket ARN as encryption context, which S3 Bucket Keys use, and the object ARNs.
    stmt = _sids(key_policy(KeyPurpose.data, FULL))["FsxLinkedBucketsUseKey"]
    assert stmt["Effect"] == "Allow" and stmt["Principal"] == {"AWS": "*"} and stmt["Resource"] == "*"
    assert stmt["Action"] == [
        "kms:Encrypt",
        "kms:Decrypt",
        "kms:ReEncrypt*",
        "kms:GenerateDataKey*",
        "kms:DescribeKey",
    ]
    assert stmt["Condition"] == {
        "ArnLike": {"aws:PrincipalArn": FSX_ROLES},
        "StringEquals": {"kms:CallerAccount": ACCOUNT, "kms:ViaService": "s3.us-east-1.amazonaws.com"},
        "StringLike": {"kms:EncryptionContext:aws:s3:arn": [DATASETS, f"{DATASETS}/*"]},
    }
    # nothing for FSx on the other keys, nor on the data key without a linked bucket
    for purpose in (KeyPurpose.eks, KeyPurpose.ebs, KeyPurpose.logs):
        assert "FsxLinkedBucketsUseKey" not in _sids(key_policy(purpose, FULL))
    assert "FsxLinkedBucketsUseKey" not in _sids(key_policy(KeyPurpose.data, ACCESS))


def test_logs_key_is_scoped_to_our_log_groups() -> None:
    stmt = _sids(key_policy(KeyPurpose.logs, FULL))["CloudWatchLogsUsesKey"]
    assert stmt["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    assert stmt["Condition"] == {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": list(GROUPS)}}
    # without named groups: the account's groups of the region (the old scope)
    china = KeyAccess(partition="aws-cn", account_id="1", region="cn-north-1")
    stmt = _sids(key_policy(KeyPurpose.logs, china))["CloudWatchLogsUsesKey"]
    assert stmt["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"] == [
        "arn:aws-cn:logs:cn-north-1:1:log-group:*"
    ]


def test_cloudtrail_uses_the_logs_key_for_our_trail_only() -> None:
    statements = _sids(key_policy(KeyPurpose.logs, FULL))
    encrypt = statements["CloudTrailEncryptsLogs"]
    assert encrypt["Principal"] == {"Service": "cloudtrail.amazonaws.com"}
    assert encrypt["Action"] == "kms:GenerateDataKey*"
    assert encrypt["Condition"]["StringEquals"] == {"aws:SourceArn": TRAIL}
    assert statements["CloudTrailDescribesKey"]["Condition"] == {"StringEquals": {"aws:SourceArn": TRAIL}}
