"""KmsKeys: customer-managed keys per purpose (data, EKS secrets, EBS, logs), rotation on, aliased."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.lib.kms_policy import DESCRIPTIONS, KeyPurpose, alias_name, key_policy


@dataclass(frozen=True, kw_only=True)
class KmsKeysArgs:
    """Inputs of KmsKeys.

    ``deletion_window_days``: 7-30; a scheduled deletion can be cancelled within the window.
    """

    name_prefix: str
    partition: str
    account_id: str
    region: str
    deletion_window_days: int = 30


class KmsKeys(pulumi.ComponentResource):
    """One customer-managed key per purpose; their ARNs are the component's outputs."""

    data_key_arn: pulumi.Output[str]
    eks_key_arn: pulumi.Output[str]
    ebs_key_arn: pulumi.Output[str]
    logs_key_arn: pulumi.Output[str]

    def __init__(self, name: str, args: KmsKeysArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:kms:KmsKeys", name, None, opts)
        if not 7 <= args.deletion_window_days <= 30:
            raise ValueError("deletion_window_days must be 7..30 (AWS limit)")
        self.keys: dict[KeyPurpose, aws.kms.Key] = {}
        for purpose in KeyPurpose:
            key = aws.kms.Key(
                f"{name}-{purpose.value}",
                description=f"{args.name_prefix}: {DESCRIPTIONS[purpose]}",
                enable_key_rotation=True,
                rotation_period_in_days=365,
                deletion_window_in_days=args.deletion_window_days,
                key_usage="ENCRYPT_DECRYPT",
                customer_master_key_spec="SYMMETRIC_DEFAULT",
                policy=json.dumps(
                    key_policy(
                        purpose, partition=args.partition, account_id=args.account_id, region=args.region
                    )
                ),
                tags={"Name": f"{args.name_prefix}-{purpose.value}", "Purpose": purpose.value},
                opts=pulumi.ResourceOptions(parent=self),
            )
            aws.kms.Alias(
                f"{name}-{purpose.value}-alias",
                name=alias_name(args.name_prefix, purpose),
                target_key_id=key.key_id,
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.keys[purpose] = key
        self.data_key_arn = self.keys[KeyPurpose.data].arn
        self.eks_key_arn = self.keys[KeyPurpose.eks].arn
        self.ebs_key_arn = self.keys[KeyPurpose.ebs].arn
        self.logs_key_arn = self.keys[KeyPurpose.logs].arn
        self.register_outputs(
            {
                "data_key_arn": self.data_key_arn,
                "eks_key_arn": self.eks_key_arn,
                "ebs_key_arn": self.ebs_key_arn,
                "logs_key_arn": self.logs_key_arn,
            }
        )
