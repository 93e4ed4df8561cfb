"""Wiring of the stack's KMS keys (data, EKS secrets, EBS, logs)."""

from __future__ import annotations

from infra.components.aws.kms import KmsKeys, KmsKeysArgs
from infra.lib.kms_policy import KeyPurpose
from infra.model import naming
from infra.wiring.context import StackContext


def wire_keys(ctx: StackContext) -> KmsKeys:
    keys = KmsKeys(
        "kms",
        KmsKeysArgs(
            stack_prefix=ctx.names.stack_prefix,
            aliases={p.value: naming.kms_alias(ctx.names.stack_prefix, p.value) for p in KeyPurpose},
            partition=ctx.account.partition,
            account_id=ctx.account.account_id,
            region=ctx.cfg.region,
        ),
        opts=ctx.in_region,
    )
    ctx.export(
        "kmsKeyArns",
        {
            "data": keys.data_key_arn,
            "eks": keys.eks_key_arn,
            "ebs": keys.ebs_key_arn,
            "logs": keys.logs_key_arn,
        },
    )
    return keys
