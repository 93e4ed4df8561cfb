"""IAM statement helpers every capability's documents use: the policy envelope, the S3 and KMS action sets,
the account root and the trust policies (account, service, IRSA, Pod Identity). Pure: functions from ARNs
and names to policy dicts (``json.dumps`` them at the call site). Least privilege throughout: no ``Allow``
statement has a wildcard principal or a ``*`` resource, except where AWS allows nothing else (the S3
gateway endpoint policy, the Session Manager channel actions, ``logs:DescribeLogGroups``,
``kms:ListKeys``/``ListAliases``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

VERSION = "2012-10-17"


Policy = dict[str, Any]


# Object-level actions a writer needs (multipart included: checkpoints are multi-GB).
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/mpuoverview.html#mpuAndPermissions
OBJECT_READ = ["s3:GetObject", "s3:GetObjectVersion"]


OBJECT_WRITE = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts"]


# SSE-KMS objects: reading needs Decrypt, writing needs GenerateDataKey (and Decrypt for multipart).
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#aws-managed-customer-managed-keys
KMS_READ = ["kms:Decrypt"]


KMS_WRITE = ["kms:Decrypt", "kms:GenerateDataKey"]


def policy(*statements: dict[str, Any]) -> Policy:
    """An IAM policy document holding ``statements``."""
    return {"Version": VERSION, "Statement": list(statements)}


def ecr_template_role_policy(
    *, repository_arns: Sequence[str], kms_key_arns: Sequence[str], replicate: bool = False
) -> Policy:
    """What ECR may do as the role of a repository creation template with a KMS key: create the repositories
    ``repository_arns`` name (and replicate images into them, with ``replicate``: a replication template)
    and encrypt them with ``kms_key_arns``. AWS's example grants ``*``; here our repositories and keys only.
    https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-custom.html
    """
    replicating = ["ecr:ReplicateImage"] if replicate else []
    create, encrypt = (
        ("CreateReplicatedRepositories", "EncryptWithReplicaKeys")
        if replicate
        else ("CreateRepositoriesOnPush", "EncryptWithTemplateKeys")
    )
    return policy(
        {
            "Sid": create,
            "Effect": "Allow",
            "Action": ["ecr:CreateRepository", *replicating, "ecr:TagResource"],
            "Resource": list(repository_arns),
        },
        {
            "Sid": encrypt,
            "Effect": "Allow",
            "Action": ["kms:CreateGrant", "kms:RetireGrant", "kms:DescribeKey"],
            "Resource": list(kms_key_arns),
        },
    )


# Where the trainer writes its run records, under each run's prefix (trainer/run/runrecord.py PREFIX; a test
# compares them): <run>/run-records/<attempt>.<event>.json, each object created once.
RUN_RECORDS = "run-records"


def keep_run_records(bucket_arns: Sequence[str], *, any_principal: bool = False) -> list[dict[str, Any]]:
    """Denials that make run records append-only: an upload under ``*run-records/*`` must carry
    ``If-None-Match`` (S3 then refuses a key that exists: the condition key is ``s3:if-none-match``,
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html), and no record
    is deleted or made a non-current version. Multipart uploads carry no such header on their first request,
    so they are refused there too (records are single small PUTs). ``any_principal``: for a bucket policy
    (every caller, the deployer's and admins' roles included; only a change of the bucket policy, logged by
    CloudTrail, or the lifecycle's expiry removes a record)."""
    resources = [f"{arn}/*{RUN_RECORDS}/*" for arn in bucket_arns]
    who: dict[str, Any] = {"Principal": "*"} if any_principal else {}
    return [
        {
            "Sid": "RunRecordsCreateOnly",
            "Effect": "Deny",
            **who,
            "Action": ["s3:PutObject"],
            "Resource": resources,
            "Condition": {"Null": {"s3:if-none-match": "true"}},
        },
        {
            "Sid": "RunRecordsNeverDeleted",
            "Effect": "Deny",
            **who,
            "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion"],
            "Resource": resources,
        },
    ]


# Where a job leaves what it produced, under its prefix of the checkpoints bucket (``<team>/outputs/<job>/``,
# the trainer's ``<prefix>/outputs/<run>/``): what the publisher signs, so written once like run records.
OUTPUTS = "outputs"


def keep_outputs(bucket_arns: Sequence[str], *, any_principal: bool = False) -> list[dict[str, Any]]:
    """Denials that make ``*/outputs/*`` write-once: ``PutObject`` and ``CompleteMultipartUpload`` (both
    ``s3:PutObject``) must carry ``If-None-Match`` (``s3:if-none-match``), so no output is replaced;
    ``CreateMultipartUpload`` and ``UploadPart`` take no conditional header and are let through by
    ``s3:ObjectCreationOperation`` (false for them), so large weights still upload; no delete.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
    ``any_principal``: for a bucket policy (every caller, as :func:`keep_run_records`)."""
    resources = [f"{arn}/*/{OUTPUTS}/*" for arn in bucket_arns]
    who: dict[str, Any] = {"Principal": "*"} if any_principal else {}
    return [
        {
            "Sid": "OutputsCreateOnly",
            "Effect": "Deny",
            **who,
            "Action": ["s3:PutObject"],
            "Resource": resources,
            "Condition": {
                "Null": {"s3:if-none-match": "true"},
                "Bool": {"s3:ObjectCreationOperation": "true"},
            },
        },
        {
            "Sid": "OutputsNeverDeleted",
            "Effect": "Deny",
            **who,
            "Action": ["s3:DeleteObject", "s3:DeleteObjectVersion"],
            "Resource": resources,
        },
    ]


def prefix_pattern(prefix: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/*" if prefix else "*"


def in_account(statement: dict[str, Any], account_id: str | None) -> dict[str, Any]:
    """``statement`` limited to buckets owned by ``account_id`` (``s3:ResourceAccount``), when given.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html#condition-key-bucket-ops-2
    """
    if account_id is None:
        return statement
    condition = dict(statement.get("Condition", {}))
    condition["StringEquals"] = {**condition.get("StringEquals", {}), "s3:ResourceAccount": account_id}
    return {**statement, "Condition": condition}


def s3_key_use(
    sid: str, actions: list[str], key_arns: Sequence[str], bucket_arns: Sequence[str], region: str | None
) -> dict[str, Any]:
    """KMS use for S3 objects only: through S3 in ``region`` (``kms:ViaService``) and for the named buckets
    (the ``aws:s3:arn`` encryption context: the bucket ARN with S3 Bucket Keys, the object ARN without).
    Without ``region`` the statement is unconditioned (MinIO, which ignores KMS statements).

    https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-via-service
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html#encryption-context
    """
    statement: dict[str, Any] = {"Sid": sid, "Effect": "Allow", "Action": actions, "Resource": list(key_arns)}
    if region is not None:
        statement["Condition"] = {
            "StringEquals": {"kms:ViaService": f"s3.{region}.amazonaws.com"},
            "StringLike": {
                "kms:EncryptionContext:aws:s3:arn": [a for b in bucket_arns for a in (b, f"{b}/*")]
            },
        }
    return statement


def irsa_trust_policy(
    oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str
) -> Policy:
    """Trust for IAM Roles for Service Accounts: only ``system:serviceaccount:<ns>:<sa>`` may assume.

    ``oidc_issuer`` is the issuer URL without ``https://`` (what IAM uses as the condition key prefix).
    https://docs.aws.amazon.com/eks/latest/userguide/associate-service-account-role.html
    """
    issuer = oidc_issuer.removeprefix("https://")
    if not namespace or not service_account:
        raise ValueError("namespace and service account must be non-empty")
    return policy(
        {
            "Sid": "AssumeFromServiceAccount",
            "Effect": "Allow",
            "Principal": {"Federated": oidc_provider_arn},
            "Action": "sts:AssumeRoleWithWebIdentity",
            "Condition": {
                "StringEquals": {
                    f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                    f"{issuer}:aud": "sts.amazonaws.com",
                }
            },
        }
    )


def account_root(partition: str, account_id: str) -> str:
    """The account root principal: in a trust or key policy it delegates to the account's IAM policies."""
    return f"arn:{partition}:iam::{account_id}:root"


def account_trust_policy(*, partition: str, account_id: str) -> Policy:
    """Trust for the account root: who may assume the role is decided by IAM policies in the account.

    https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_create_for-user.html
    """
    return policy(
        {
            "Effect": "Allow",
            "Principal": {"AWS": account_root(partition, account_id)},
            "Action": "sts:AssumeRole",
        }
    )


def service_trust_policy(
    service: str,
    account_id: str | None = None,
    *,
    tag_session: bool = False,
    source_arn: str | Sequence[str] | None = None,
) -> Policy:
    """Trust for an AWS service principal; with ``account_id``, only when it acts for this account
    (``aws:SourceAccount``), with ``source_arn`` only for that resource (``aws:SourceArn``): the
    confused-deputy guards, for services that send them.
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html
    """
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"],
    }
    condition: dict[str, Any] = {}
    if account_id is not None:
        condition["StringEquals"] = {"aws:SourceAccount": account_id}
    if source_arn is not None:
        condition["ArnLike"] = {
            "aws:SourceArn": source_arn if isinstance(source_arn, str) else list(source_arn)
        }
    if condition:
        statement["Condition"] = condition
    return policy(statement)


def pod_identity_trust_policy(
    *,
    account_id: str | None = None,
    cluster_name: str | None = None,
    namespace: str | None = None,
    service_account: str | None = None,
) -> Policy:
    """Trust for EKS Pod Identity, scoped by the session tags Pod Identity sets (cluster, namespace,
    service account) and the account: without them any association in the account could use the role.

    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html
    https://docs.aws.amazon.com/eks/latest/userguide/pod-id-abac.html#pod-id-abac-tags
    """
    doc = service_trust_policy("pods.eks.amazonaws.com", tag_session=True)
    equals = {
        key: value
        for key, value in (
            ("aws:SourceAccount", account_id),
            ("aws:RequestTag/eks-cluster-name", cluster_name),
            ("aws:RequestTag/kubernetes-namespace", namespace),
            ("aws:RequestTag/kubernetes-service-account", service_account),
        )
        if value is not None
    }
    if equals:
        doc["Statement"][0]["Condition"] = {"StringEquals": equals}
    return doc
