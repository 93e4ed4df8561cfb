"""KMS key policies as data.

Every key keeps the account root in control (AWS's default key policy) and grants a service principal
only where the service needs the key without a caller's IAM permissions.

A key policy may only name principals that exist ("The principals in the key policy must exist and be
visible to KMS", https://docs.aws.amazon.com/kms/latest/APIReference/API_CreateKey.html), or CreateKey
fails with MalformedPolicyDocumentException. So a role that may not exist yet (the Auto Scaling
service-linked role; the FSx roles ``AWSServiceRoleForFSxS3Access_<fs-id>``) is named by
``Principal {"AWS": "*"}`` with ``aws:PrincipalArn`` and ``kms:CallerAccount`` = our account, the shape
of AWS's EBS managed key
(https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-caller-account).
Every ``*`` principal here is bound by both conditions (a test checks it).

References:
- Default key policy: https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
- EBS CMK for Auto Scaling (managed node groups launch through it; without this nodes never start):
  https://docs.aws.amazon.com/autoscaling/ec2/userguide/key-policy-requirements-EBS-encryption.html
- aws:PrincipalArn:
https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn
- CloudWatch Logs: https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
- FSx for Lustre linked to an SSE-KMS bucket (each file system's service-linked role uses the bucket's key
  through S3): https://docs.aws.amazon.com/fsx/latest/LustreGuide/s3-server-side-encryption-support.html
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from infra.core.iam import VERSION, account_root

KEY_ADMIN_ACTIONS = ["kms:*"]  # the account root's statement: IAM decides (AWS's default key policy)
USE_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:DescribeKey"]


class KeyPurpose(StrEnum):
    """One customer-managed key per purpose, so access can be granted (and revoked) per purpose."""

    data = "data"  # S3 datasets, checkpoints, artifacts; ECR repositories
    eks = "eks"  # EKS secrets envelope encryption
    ebs = "ebs"  # node root volumes
    logs = "logs"  # CloudWatch Logs: VPC flow logs, EKS control-plane logs


DESCRIPTIONS = {
    KeyPurpose.data: "S3 buckets (datasets, checkpoints, artifacts) and ECR repositories",
    KeyPurpose.eks: "EKS Kubernetes secrets envelope encryption",
    KeyPurpose.ebs: "EBS volumes of EKS nodes",
    KeyPurpose.logs: "CloudWatch Logs (VPC flow logs, EKS control plane)",
}


def autoscaling_service_linked_role(partition: str, account_id: str) -> str:
    return (
        f"arn:{partition}:iam::{account_id}:role/aws-service-role/autoscaling.amazonaws.com/"
        "AWSServiceRoleForAutoScaling"
    )


def fsx_s3_access_roles(partition: str, account_id: str) -> str:
    """An ``ArnLike`` pattern of the service-linked roles FSx for Lustre creates per file system to reach a
    linked S3 bucket (``AWSServiceRoleForFSxS3Access_<file system id>``, path
    ``aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/``): the role of a file system this stack has
    not created yet, so it cannot be named (see the module docstring)."""
    return (
        f"arn:{partition}:iam::{account_id}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/"
        "AWSServiceRoleForFSxS3Access_fs-*"
    )


def only_principal(principal_arn: str, account_id: str) -> dict[str, Any]:
    """Conditions that limit a ``"Principal": {"AWS": "*"}`` statement to one principal of our account,
    whether or not it exists yet (see the module docstring)."""
    return {
        "ArnEquals": {"aws:PrincipalArn": principal_arn},
        "StringEquals": {"kms:CallerAccount": account_id},
    }


@dataclass(frozen=True, kw_only=True)
class KeyAccess:
    """Who may do what with a stack's keys, beyond the account root (see ``key_policy``).

    ``key_admin_role_arn``: administers the keys, is denied every cryptographic action.
    ``break_glass_role_arn`` with ``protect``: the only principal that may schedule deletion or disable,
    and with ``deployer_role_arn`` (the role that runs ``pulumi up``) the only ones that may change the key
    policy.
    ``log_group_arns``: the log groups CloudWatch Logs may encrypt with the logs key (encryption context).
    ``trail_arn``: the CloudTrail trail that encrypts its log files with the logs key.
    ``events_publish``: EventBridge publishes to an SNS topic encrypted with the logs key.
    ``fsx_linked_bucket_arns``: buckets under the data key that an FSx for Lustre file system of this
    account links (its service-linked role reads and writes their objects through S3).
    """

    partition: str
    account_id: str
    region: str
    key_admin_role_arn: str | None = None
    break_glass_role_arn: str | None = None
    deployer_role_arn: str | None = None
    protect: bool = False
    log_group_arns: tuple[str, ...] = ()
    trail_arn: str | None = None
    events_publish: bool = False
    fsx_linked_bucket_arns: tuple[str, ...] = ()


CRYPTO_ACTIONS = [
    "kms:Encrypt",
    "kms:Decrypt",
    "kms:ReEncrypt*",
    "kms:GenerateDataKey*",
    "kms:CreateGrant",
]


def key_policy(purpose: KeyPurpose, access: KeyAccess) -> dict[str, Any]:
    """The key policy document for one purpose."""
    partition, account_id = access.partition, access.account_id
    statements: list[dict[str, Any]] = [
        {
            # The account root delegates to IAM policies (the deploying identity, the pod and node roles
            # get their key use from IAM). Without it IAM policies on the key are ineffective.
            "Sid": "AccountAdministers",
            "Effect": "Allow",
            "Principal": {"AWS": account_root(partition, account_id)},
            "Action": KEY_ADMIN_ACTIONS,
            "Resource": "*",
        }
    ]
    if access.key_admin_role_arn:
        # Separation of duties: the key administrator role manages the key (its IAM policy) but can
        # never use it, whatever IAM policy it is given. An explicit deny names the role by
        # aws:PrincipalArn, so the policy is valid before the role exists.
        statements.append(
            {
                "Sid": "KeyAdministratorsNeverUseKey",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": CRYPTO_ACTIONS,
                "Resource": "*",
                "Condition": {"ArnEquals": {"aws:PrincipalArn": access.key_admin_role_arn}},
            }
        )
    if access.protect:
        if not access.break_glass_role_arn:
            raise ValueError("a protected key needs a break-glass role")
        # Nobody but the break-glass role schedules deletion or disables the key: not the deploying
        # identity (a `pulumi destroy` or a renamed resource), not the root user.
        # https://docs.aws.amazon.com/kms/latest/developerguide/deleting-keys-adding-permission.html
        statements.append(
            {
                "Sid": "OnlyBreakGlassDeletesKey",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": ["kms:ScheduleKeyDeletion", "kms:DisableKey"],
                "Resource": "*",
                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": access.break_glass_role_arn}},
            }
        )
        if not access.deployer_role_arn:
            raise ValueError("a protected key needs the deployer role (it updates the key policy)")
        # Whoever rewrites a key policy can then grant itself decrypt or deletion: only break-glass, and the
        # deployer for the program's own updates. A negated operator with several values matches a principal
        # equal to none of them. KMS refuses a policy that locks out the caller (the lockout safety check),
        # so a wrong deployer role fails CreateKey/PutKeyPolicy instead of stranding the key.
        # https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#prevent-unmanageable-key
        statements.append(
            {
                "Sid": "OnlyBreakGlassAndDeployerChangePolicy",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": ["kms:PutKeyPolicy"],
                "Resource": "*",
                "Condition": {
                    "ArnNotEquals": {
                        "aws:PrincipalArn": [access.break_glass_role_arn, access.deployer_role_arn]
                    }
                },
            }
        )
    if purpose is KeyPurpose.ebs:
        # The two statements AWS documents for the Auto Scaling service-linked role (managed node groups
        # launch through it), with the role moved from Principal into a condition: in a fresh account
        # the role does not exist until the first Auto Scaling group, and naming it as a Principal makes
        # CreateKey fail ("Policy contains a statement with one or more invalid principals").
        slr = only_principal(autoscaling_service_linked_role(partition, account_id), account_id)
        statements += [
            {
                "Sid": "AutoScalingUsesKey",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": USE_ACTIONS,
                "Resource": "*",
                "Condition": slr,
            },
            {
                "Sid": "AutoScalingAttachesVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": "*"},
                "Action": ["kms:CreateGrant"],
                "Resource": "*",
                "Condition": {**slr, "Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
        ]
    elif purpose is KeyPurpose.logs:
        statements += _logs_key_statements(access)
    elif purpose is KeyPurpose.data and access.fsx_linked_bucket_arns:
        statements.append(_fsx_linked_buckets_statement(access))
    return {"Version": VERSION, "Id": f"aiplat-{purpose.value}", "Statement": statements}


def _fsx_linked_buckets_statement(access: KeyAccess) -> dict[str, Any]:
    """The statement the FSx for Lustre guide gives for a file system linked to an SSE-KMS bucket, with the
    file system's service-linked role moved from ``Principal`` into an ``aws:PrincipalArn`` condition (the
    role appears when FSx links the file system to the bucket, after this key exists; its name holds the
    file system id, hence ``ArnLike`` on the ``fs-*`` suffix). The encryption context is the bucket ARN, as
    S3 Bucket Keys set it ("If you're using [...] S3 Bucket Keys enabled, set the EncryptionContext to the
    bucket ARN, not the object ARN"), plus the object ARNs of objects written without a bucket key. Only
    through S3 in this region (``kms:ViaService``), only our account (``kms:CallerAccount``).
    https://docs.aws.amazon.com/fsx/latest/LustreGuide/s3-server-side-encryption-support.html
    """
    partition, account_id, region = access.partition, access.account_id, access.region
    contexts = [a for arn in access.fsx_linked_bucket_arns for a in (arn, f"{arn}/*")]
    return {
        "Sid": "FsxLinkedBucketsUseKey",
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": USE_ACTIONS,
        "Resource": "*",
        "Condition": {
            "ArnLike": {"aws:PrincipalArn": fsx_s3_access_roles(partition, account_id)},
            "StringEquals": {
                "kms:CallerAccount": account_id,
                "kms:ViaService": f"s3.{region}.amazonaws.com",
            },
            "StringLike": {"kms:EncryptionContext:aws:s3:arn": contexts},
        },
    }


def _logs_key_statements(access: KeyAccess) -> list[dict[str, Any]]:
    partition, account_id, region = access.partition, access.account_id, access.region
    groups = list(access.log_group_arns) or [f"arn:{partition}:logs:{region}:{account_id}:log-group:*"]
    statements: list[dict[str, Any]] = [
        {
            # Only for our log groups: the encryption context names the group.
            # https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
            "Sid": "CloudWatchLogsUsesKey",
            "Effect": "Allow",
            "Principal": {"Service": f"logs.{region}.amazonaws.com"},
            "Action": [
                "kms:Encrypt*",
                "kms:Decrypt*",
                "kms:ReEncrypt*",
                "kms:GenerateDataKey*",
                "kms:Describe*",
            ],
            "Resource": "*",
            "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": groups}},
        }
    ]
    if access.trail_arn:
        trails = f"arn:{partition}:cloudtrail:*:{account_id}:trail/*"
        # https://docs.aws.amazon.com/awscloudtrail/latest/userguide/create-kms-key-policy-for-cloudtrail.html
        statements += [
            {
                "Sid": "CloudTrailEncryptsLogs",
                "Effect": "Allow",
                "Principal": {"Service": "cloudtrail.amazonaws.com"},
                "Action": "kms:GenerateDataKey*",
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:SourceArn": access.trail_arn},
                    "StringLike": {"kms:EncryptionContext:aws:cloudtrail:arn": trails},
                },
            },
            {
                "Sid": "CloudTrailDescribesKey",
                "Effect": "Allow",
                "Principal": {"Service": "cloudtrail.amazonaws.com"},
                "Action": "kms:DescribeKey",
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:SourceArn": access.trail_arn}},
            },
        ]
    if access.events_publish:
        # EventBridge publishing to an SNS topic encrypted with this key, as the SNS guide writes it, with
        # the confused-deputy guards: only for rules of our account in this region. Who may publish is
        # decided by the topic policy: our rules only (iam.alerts_topic_policy).
        # https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services
        # https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html
        statements.append(
            {
                "Sid": "EventBridgePublishesAlerts",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": ["kms:Decrypt", "kms:GenerateDataKey*"],
                "Resource": "*",
                "Condition": {
                    "StringEquals": {"aws:SourceAccount": account_id},
                    "ArnLike": {"aws:SourceArn": f"arn:{partition}:events:{region}:{account_id}:rule/*"},
                },
            }
        )
    return statements
