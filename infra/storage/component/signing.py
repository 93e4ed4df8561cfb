"""The release signing key: an asymmetric KMS key the publisher signs release manifests with.

Its public half (``kms:GetPublicKey``) is a stack output the infer stacks read through their
StackReference and mount into the fetch container, which verifies offline (trainer/release/signing.py): one
key in
the training region, no multi-Region replicas to keep in step, no KMS call from the inference regions, and
a public key is not a secret. Asymmetric keys do not rotate automatically; a new key means a new key and
re-signed (or re-published) releases.
https://docs.aws.amazon.com/kms/latest/developerguide/symmetric-asymmetric.html
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.keys.component.kms import KEYSET_TAG
from infra.resources.aws import fixed_name, protected
from infra.storage import documents as storage_documents


@dataclass(frozen=True, kw_only=True)
class ReleaseSigningKeyArgs:
    """Inputs of ReleaseSigningKey: the alias (account-wide per region), the ``aiplat:keyset`` tag value,
    the principals of its key policy (``storage_documents.release_signing_key_policy``) and protection."""

    alias: str
    keyset: str
    account_root_arn: str
    publisher_role_arn: str
    key_admin_role_arn: str
    break_glass_role_arn: str
    deployer_role_arn: str | None = None
    protect: bool = False
    deletion_window_days: int = 30


class ReleaseSigningKey(pulumi.ComponentResource):
    """An ``ECC_NIST_P256`` ``SIGN_VERIFY`` KMS key, its alias, and its public key in PEM."""

    key_arn: pulumi.Output[str]
    public_key_pem: pulumi.Output[str]

    def __init__(self, name: str, args: ReleaseSigningKeyArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:storage:ReleaseSigningKey", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        doc = storage_documents.release_signing_key_policy(
            account_root_arn=args.account_root_arn,
            publisher_role_arn=args.publisher_role_arn,
            key_admin_role_arn=args.key_admin_role_arn,
            break_glass_role_arn=args.break_glass_role_arn,
            deployer_role_arn=args.deployer_role_arn,
            protect=args.protect,
        )
        self.key = aws.kms.Key(
            f"{name}-key",
            description="Signs model release manifests (python -m trainer.release.publish); verified by the "
            "inference fetch container with the public key",
            key_usage="SIGN_VERIFY",
            customer_master_key_spec=storage_documents.SIGNING_KEY_SPEC,
            deletion_window_in_days=args.deletion_window_days,
            policy=json.dumps(doc),
            tags={
                "Name": args.alias.removeprefix("alias/"),
                "Purpose": "release-signing",
                KEYSET_TAG: args.keyset,
            },
            opts=protected(child, args.protect),
        )
        aws.kms.Alias(f"{name}-alias", name=args.alias, target_key_id=self.key.key_id, opts=fixed_name(child))
        self.key_arn = self.key.arn
        public = aws.kms.get_public_key_output(
            key_id=self.key.arn, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        self.public_key_pem = public.public_key_pem
        self.register_outputs({"key_arn": self.key_arn, "public_key_pem": self.public_key_pem})
