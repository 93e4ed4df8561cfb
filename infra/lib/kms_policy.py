"""KMS key policies as data.

Every key keeps the account in control (the account root principal, which delegates to IAM policies,
as AWS's default key policy does) and grants a service principal only where that service needs the key
without a caller's IAM permissions. No statement has a wildcard principal.

References:
- Default key policy: https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
- EBS CMK for Auto Scaling (managed node groups launch through it; without this nodes never start):
  https://docs.aws.amazon.com/autoscaling/ec2/userguide/key-policy-requirements-EBS-encryption.html
- CloudWatch Logs: https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from infra.lib.iam import VERSION

KEY_ADMIN_ACTIONS = ["kms:*"]
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


def account_root(partition: str, account_id: str) -> str:
    return f"arn:{partition}:iam::{account_id}:root"


def autoscaling_service_linked_role(partition: str, account_id: str) -> str:
    return (
        f"arn:{partition}:iam::{account_id}:role/aws-service-role/autoscaling.amazonaws.com/"
        "AWSServiceRoleForAutoScaling"
    )


def key_policy(purpose: KeyPurpose, *, partition: str, account_id: str, region: str) -> dict[str, Any]:
    """The key policy document for one purpose."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AccountAdministers",
            "Effect": "Allow",
            "Principal": {"AWS": account_root(partition, account_id)},
            "Action": KEY_ADMIN_ACTIONS,
            "Resource": "*",
        }
    ]
    if purpose is KeyPurpose.ebs:
        slr = autoscaling_service_linked_role(partition, account_id)
        statements += [
            {
                "Sid": "AutoScalingUsesKey",
                "Effect": "Allow",
                "Principal": {"AWS": slr},
                "Action": USE_ACTIONS,
                "Resource": "*",
            },
            {
                "Sid": "AutoScalingAttachesVolumes",
                "Effect": "Allow",
                "Principal": {"AWS": slr},
                "Action": ["kms:CreateGrant"],
                "Resource": "*",
                "Condition": {"Bool": {"kms:GrantIsForAWSResource": "true"}},
            },
        ]
    elif purpose is KeyPurpose.logs:
        statements.append(
            {
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
                "Condition": {
                    "ArnLike": {
                        "kms:EncryptionContext:aws:logs:arn": f"arn:{partition}:logs:{region}:{account_id}:*"
                    }
                },
            }
        )
    return {"Version": VERSION, "Id": f"aiplat-{purpose.value}", "Statement": statements}
