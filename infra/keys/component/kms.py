"""KmsKeys: customer-managed keys per purpose (data, EKS secrets, EBS, logs), rotation on, aliased."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.keys.documents.kms_policy import DESCRIPTIONS, KeyAccess, KeyPurpose, key_policy
from infra.resources.aws import fixed_name, protected

# Tag that marks the keys of one stack: the key administrator and break-glass roles' IAM policies are
# limited to keys carrying their stack's value (aws:ResourceTag), so they need no key ARNs.
KEYSET_TAG = "aiplat:keyset"


def customer_managed_key(
    name: str,
    *,
    purpose: KeyPurpose,
    description: str,
    alias: str,
    name_tag: str,
    keyset: str,
    access: KeyAccess,
    deletion_window_days: int,
    parent: pulumi.Resource,
    in_other_region: bool = False,
) -> aws.kms.Key:
    """A symmetric key with yearly rotation, the purpose's key policy and an alias (``<name>-alias``).

    ``in_other_region`` places key and alias in ``access.region`` through pulumi-aws v7's per-resource
    region argument instead of the provider's region (replica keys of other regions). ``access.protect``
    adds Pulumi's protect and retain_on_delete: neither a ``pulumi destroy`` nor a rename schedules the
    key's deletion.
    """
    where = {"region": access.region} if in_other_region else {}
    opts = pulumi.ResourceOptions(parent=parent)
    key = aws.kms.Key(
        name,
        description=description,
        enable_key_rotation=True,
        rotation_period_in_days=365,
        deletion_window_in_days=deletion_window_days,
        key_usage="ENCRYPT_DECRYPT",
        customer_master_key_spec="SYMMETRIC_DEFAULT",
        policy=json.dumps(key_policy(purpose, access)),
        tags={"Name": name_tag, "Purpose": purpose.value, KEYSET_TAG: keyset},
        opts=protected(opts, access.protect),
        **where,
    )
    aws.kms.Alias(f"{name}-alias", name=alias, target_key_id=key.key_id, opts=fixed_name(opts), **where)
    return key


@dataclass(frozen=True, kw_only=True)
class KmsKeysArgs:
    """Inputs of KmsKeys.

    ``aliases``: purpose (``data``, ``eks``, ``ebs``, ``logs``) -> alias name, decided by the caller;
    ``keyset``: the value of the ``aiplat:keyset`` tag on every key; ``access``: the key policies' roles,
    protection and log groups; ``deletion_window_days``: 7-30, a scheduled deletion can be cancelled
    within the window.
    """

    stack_prefix: str
    aliases: Mapping[str, str]
    keyset: str
    access: KeyAccess
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
            self.keys[purpose] = customer_managed_key(
                f"{name}-{purpose.value}",
                purpose=purpose,
                description=f"{args.stack_prefix}: {DESCRIPTIONS[purpose]}",
                alias=args.aliases[purpose.value],
                name_tag=f"{args.stack_prefix}-{purpose.value}",
                keyset=args.keyset,
                access=args.access,
                deletion_window_days=args.deletion_window_days,
                parent=self,
            )
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
