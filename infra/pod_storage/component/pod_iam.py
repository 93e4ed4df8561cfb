"""PodRoles: IAM roles for service accounts (IRSA) of the trainer and inference pods.

Each role trusts exactly one service account (``system:serviceaccount:<namespace>:<name>``) through the
cluster's OIDC provider, and may touch only its buckets and prefix, plus the KMS key(s) those objects are
encrypted with. The cluster's ``oidc_provider_arn`` and ``oidc_issuer`` (URL without ``https://``) come in as
inputs from the EKS component.
https://docs.aws.amazon.com/eks/latest/userguide/iam-roles-for-service-accounts.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.resources.aws import fixed_name
from infra.resources.irsa import irsa_role
from infra.storage import documents as storage_documents


@dataclass(frozen=True, kw_only=True)
class ServiceAccountRef:
    """The service account a role is for, and the key prefix it may use ('' = whole bucket)."""

    namespace: str
    service_account: str
    prefix: str


@dataclass(frozen=True, kw_only=True)
class TrainerAccess:
    """Trainer: read ``datasets``; read/write ``checkpoints`` and ``artifacts`` under its prefix."""

    who: ServiceAccountRef
    datasets_arn: pulumi.Input[str]
    checkpoints_arn: pulumi.Input[str]
    artifacts_arn: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class PublisherAccess:
    """Publisher: read the Hugging Face folders under ``source_prefixes`` of ``checkpoints`` (the trainer's
    and the releasing teams' output prefixes), write new objects under its ``who.prefix`` (``release``) of
    ``artifacts``; no delete."""

    who: ServiceAccountRef
    checkpoints_arn: pulumi.Input[str]
    source_prefixes: Sequence[str]
    artifacts_arn: pulumi.Input[str]
    # the role's fixed name: the artifacts bucket policy and the signing key policy name it by ARN
    role_name: str | None = None
    # the release signing key (kms:Sign on it; its key policy lets no one else sign)
    signing_key_arn: pulumi.Input[str] | None = None


@dataclass(frozen=True, kw_only=True)
class InferenceAccess:
    """Inference: read ``artifacts`` (in an inference region: the replica bucket) under its prefix."""

    who: ServiceAccountRef
    artifacts_arn: pulumi.Input[str]


@dataclass(frozen=True, kw_only=True)
class PodRolesArgs:
    """Inputs of PodRoles; a role is created for each access given. With ``account_id`` and ``region`` the
    S3 statements name only our account's buckets (``s3:ResourceAccount``) and the KMS statements allow the
    keys only through S3 in ``region`` for the buckets involved."""

    stack_prefix: str
    oidc_provider_arn: pulumi.Input[str]
    oidc_issuer: pulumi.Input[str]
    kms_key_arns: Sequence[pulumi.Input[str]] = field(default_factory=tuple)
    trainer: TrainerAccess | None = None
    publisher: PublisherAccess | None = None
    inference: InferenceAccess | None = None
    account_id: str | None = None
    region: str | None = None


class PodRoles(pulumi.ComponentResource):
    """IRSA roles; annotate the service account with ``eks.amazonaws.com/role-arn: <role arn>``."""

    trainer_role_arn: pulumi.Output[str] | None
    publisher_role_arn: pulumi.Output[str] | None
    inference_role_arn: pulumi.Output[str] | None

    def __init__(self, name: str, args: PodRolesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:pod_iam:PodRoles", name, None, opts)
        if args.trainer is None and args.inference is None and args.publisher is None:
            raise ValueError("PodRoles needs trainer, publisher or inference access")
        keys = pulumi.Output.all(*args.kms_key_arns)
        where = {"account_id": args.account_id, "region": args.region}
        self.trainer_role_arn = None
        self.publisher_role_arn = None
        self.inference_role_arn = None
        if args.trainer is not None:
            t = args.trainer
            doc = pulumi.Output.all(t.datasets_arn, t.checkpoints_arn, t.artifacts_arn, keys).apply(
                lambda v: json.dumps(
                    storage_documents.trainer_policy(
                        datasets_arn=v[0],
                        checkpoints_arn=v[1],
                        artifacts_arn=v[2],
                        prefix=t.who.prefix,
                        kms_key_arns=v[3],
                        **where,
                    )
                )
            )
            self.trainer_role_arn = self._role(f"{name}-trainer", args, t.who, doc).arn
        if args.publisher is not None:
            pub = args.publisher
            doc = pulumi.Output.all(pub.checkpoints_arn, pub.artifacts_arn, keys, pub.signing_key_arn).apply(
                lambda v: json.dumps(
                    storage_documents.publisher_policy(
                        checkpoints_arn=v[0],
                        source_prefixes=pub.source_prefixes,
                        artifacts_arn=v[1],
                        release_prefix=pub.who.prefix,
                        kms_key_arns=v[2],
                        signing_key_arn=v[3],
                        **where,
                    )
                )
            )
            named = {"name": pub.role_name} if pub.role_name else {}
            self.publisher_role_arn = self._role(f"{name}-publisher", args, pub.who, doc, **named).arn
        if args.inference is not None:
            i = args.inference
            doc = pulumi.Output.all(i.artifacts_arn, keys).apply(
                lambda v: json.dumps(
                    storage_documents.inference_policy(
                        artifacts_arn=v[0], prefix=i.who.prefix, kms_key_arns=v[1], **where
                    )
                )
            )
            self.inference_role_arn = self._role(f"{name}-inference", args, i.who, doc).arn
        self.register_outputs(
            {
                "trainer_role_arn": self.trainer_role_arn,
                "publisher_role_arn": self.publisher_role_arn,
                "inference_role_arn": self.inference_role_arn,
            }
        )

    def _role(
        self, role: str, args: PodRolesArgs, who: ServiceAccountRef, doc: pulumi.Output[str], **named: str
    ) -> aws.iam.Role:
        child = pulumi.ResourceOptions(parent=self)
        r = irsa_role(
            role,
            oidc_provider_arn=args.oidc_provider_arn,
            oidc_issuer=args.oidc_issuer,
            namespace=who.namespace,
            service_account=who.service_account,
            description=f"{args.stack_prefix}: pods of {who.namespace}/{who.service_account}",
            max_session_duration=3600,
            opts=fixed_name(child) if named else child,
            **named,
        )
        aws.iam.RolePolicy(f"{role}-policy", role=r.id, policy=doc, opts=child)
        return r
