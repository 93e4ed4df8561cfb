"""IAM policy documents as data: trust policies, pod permissions, bucket policies, replication.

Pure functions from ARNs/names to policy dicts (``json.dumps`` them at the call site). No Pulumi imports,
so every document is table-tested in ``tests/infra/lib/test_iam.py``. Least privilege throughout: no
``Allow`` statement has a wildcard principal or a ``*`` resource.
"""

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


def _prefix_pattern(prefix: str) -> str:
    prefix = prefix.strip("/")
    return f"{prefix}/*" if prefix else "*"


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


def trainer_policy(
    *, datasets_arn: str, checkpoints_arn: str, artifacts_arn: str, prefix: str, kms_key_arns: Sequence[str]
) -> Policy:
    """Trainer pods: read all datasets; read/write checkpoints and artifacts under ``prefix/`` only."""
    pattern = _prefix_pattern(prefix)
    written = [checkpoints_arn, artifacts_arn]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ListDatasets",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:GetBucketLocation"],
            "Resource": [datasets_arn],
        },
        {"Sid": "ReadDatasets", "Effect": "Allow", "Action": OBJECT_READ, "Resource": [f"{datasets_arn}/*"]},
        {
            "Sid": "ListOwnPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"],
            "Resource": written,
            # Listing is a bucket-level action; s3:prefix keeps it inside the trainer's prefix.
            # https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
            "Condition": {"StringLike": {"s3:prefix": [pattern, prefix.strip("/")]}},
        },
        {
            "Sid": "ReadWriteOwnPrefix",
            "Effect": "Allow",
            "Action": OBJECT_READ + OBJECT_WRITE,
            "Resource": [f"{arn}/{pattern}" for arn in written],
        },
    ]
    if kms_key_arns:
        statements.append(
            {"Sid": "UseDataKey", "Effect": "Allow", "Action": KMS_WRITE, "Resource": list(kms_key_arns)}
        )
    return policy(*statements)


def inference_policy(*, artifacts_arn: str, prefix: str, kms_key_arns: Sequence[str]) -> Policy:
    """Inference pods: read model artifacts under ``prefix/`` and nothing else."""
    pattern = _prefix_pattern(prefix)
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ListArtifacts",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [artifacts_arn],
            "Condition": {"StringLike": {"s3:prefix": [pattern, prefix.strip("/")]}},
        },
        {
            "Sid": "ReadArtifacts",
            "Effect": "Allow",
            "Action": OBJECT_READ,
            "Resource": [f"{artifacts_arn}/{pattern}"],
        },
    ]
    if kms_key_arns:
        statements.append(
            {"Sid": "DecryptArtifacts", "Effect": "Allow", "Action": KMS_READ, "Resource": list(kms_key_arns)}
        )
    return policy(*statements)


def deny_insecure_transport(bucket_arn: str) -> dict[str, Any]:
    """Deny every request that does not use TLS (a Deny with ``*`` principal is the documented pattern).

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html#transit
    """
    return {
        "Sid": "DenyInsecureTransport",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}},
    }


def bucket_policy(bucket_arn: str) -> Policy:
    """Policy of a data bucket: TLS only."""
    return policy(deny_insecure_transport(bucket_arn))


def access_log_bucket_policy(
    log_bucket_arn: str, source_bucket_arns: Sequence[str], account_id: str
) -> Policy:
    """Policy of the access-log bucket: TLS only, and the S3 logging service may write for our buckets only.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html#grant-log-delivery-permissions-general
    """
    return policy(
        deny_insecure_transport(log_bucket_arn),
        {
            "Sid": "S3ServerAccessLogsPolicy",
            "Effect": "Allow",
            "Principal": {"Service": "logging.s3.amazonaws.com"},
            "Action": "s3:PutObject",
            "Resource": [f"{log_bucket_arn}/*"],
            "Condition": {
                "ArnLike": {"aws:SourceArn": list(source_bucket_arns)},
                "StringEquals": {"aws:SourceAccount": account_id},
            },
        },
    )


def service_trust_policy(service: str, account_id: str | None = None, *, tag_session: bool = False) -> Policy:
    """Trust for an AWS service principal; with ``account_id``, only when it acts for this account
    (``aws:SourceAccount``, the confused-deputy guard, for services that send it)."""
    statement: dict[str, Any] = {
        "Effect": "Allow",
        "Principal": {"Service": service},
        "Action": ["sts:AssumeRole", "sts:TagSession"] if tag_session else ["sts:AssumeRole"],
    }
    if account_id is not None:
        statement["Condition"] = {"StringEquals": {"aws:SourceAccount": account_id}}
    return policy(statement)


def pod_identity_trust_policy() -> Policy:
    """Trust for EKS Pod Identity (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html)."""
    return service_trust_policy("pods.eks.amazonaws.com", tag_session=True)


def replication_policy(
    *,
    source_bucket_arn: str,
    source_key_arn: str,
    source_region: str,
    destinations: Sequence[tuple[str, str, str]],
) -> Policy:
    """What the S3 replication role may do: read versions from the source, replicate into each destination.

    ``destinations`` holds ``(bucket_arn, key_arn, region)``. KMS use is limited to S3 in the right region
    (``kms:ViaService``) and to the buckets involved (encryption context). With S3 Bucket Keys the context is
    the bucket ARN, without them the object ARN, so both are allowed.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/setting-repl-config-perm-overview.html
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/replication-config-for-kms-objects.html
    """
    if not destinations:
        raise ValueError("replication needs at least one destination")
    dest_buckets = [b for b, _, _ in destinations]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ReadSourceConfig",
            "Effect": "Allow",
            "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
            "Resource": [source_bucket_arn],
        },
        {
            "Sid": "ReadSourceVersions",
            "Effect": "Allow",
            "Action": [
                "s3:GetObjectVersionForReplication",
                "s3:GetObjectVersionAcl",
                "s3:GetObjectVersionTagging",
            ],
            "Resource": [f"{source_bucket_arn}/*"],
        },
        {
            "Sid": "ReplicateIntoDestinations",
            "Effect": "Allow",
            "Action": ["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
            "Resource": [f"{b}/*" for b in dest_buckets],
        },
        {
            "Sid": "DecryptSource",
            "Effect": "Allow",
            "Action": ["kms:Decrypt"],
            "Resource": [source_key_arn],
            "Condition": {
                "StringLike": {
                    "kms:ViaService": f"s3.{source_region}.amazonaws.com",
                    "kms:EncryptionContext:aws:s3:arn": [source_bucket_arn, f"{source_bucket_arn}/*"],
                }
            },
        },
    ]
    for i, (bucket_arn, key_arn, region) in enumerate(destinations):
        statements.append(
            {
                "Sid": f"EncryptDestination{i}",
                "Effect": "Allow",
                "Action": ["kms:Encrypt", "kms:GenerateDataKey"],
                "Resource": [key_arn],
                "Condition": {
                    "StringLike": {
                        "kms:ViaService": f"s3.{region}.amazonaws.com",
                        "kms:EncryptionContext:aws:s3:arn": [bucket_arn, f"{bucket_arn}/*"],
                    }
                },
            }
        )
    return policy(*statements)


def ecr_lifecycle_policy(*, untagged_days: int, keep_tagged: int) -> Policy:
    """ECR lifecycle: expire untagged images after ``untagged_days``; keep the newest ``keep_tagged`` others.

    https://docs.aws.amazon.com/AmazonECR/latest/userguide/lifecycle_policy_parameters.html
    """
    if untagged_days < 1 or keep_tagged < 1:
        raise ValueError("untagged_days and keep_tagged must be at least 1")
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": f"expire untagged images after {untagged_days} days",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "sinceImagePushed",
                    "countUnit": "days",
                    "countNumber": untagged_days,
                },
                "action": {"type": "expire"},
            },
            {
                "rulePriority": 2,
                "description": f"keep the newest {keep_tagged} images",
                "selection": {
                    "tagStatus": "any",
                    "countType": "imageCountMoreThan",
                    "countNumber": keep_tagged,
                },
                "action": {"type": "expire"},
            },
        ]
    }


def ecr_template_role_policy(*, repository_arns: Sequence[str], kms_key_arns: Sequence[str]) -> Policy:
    """What ECR may do when it creates replicated repositories from a creation template with a KMS key.

    AWS's example grants ``*``; here it is scoped to our repository namespace and the replica keys.
    https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-creation-templates-custom.html
    """
    return policy(
        {
            "Sid": "CreateReplicatedRepositories",
            "Effect": "Allow",
            "Action": ["ecr:CreateRepository", "ecr:ReplicateImage", "ecr:TagResource"],
            "Resource": list(repository_arns),
        },
        {
            "Sid": "EncryptWithReplicaKeys",
            "Effect": "Allow",
            "Action": ["kms:CreateGrant", "kms:RetireGrant", "kms:DescribeKey"],
            "Resource": list(kms_key_arns),
        },
    )


def minio_policy_statements(doc: Policy) -> list[dict[str, Any]]:
    """An IAM policy's S3 ``Allow`` statements in the MinIO chart's ``policies[].statements`` form.

    MinIO has no KMS here and the chart's condition syntax differs, so KMS statements and conditions are
    dropped: listing is then bucket-wide, object access stays limited to the prefix.
    """
    out: list[dict[str, Any]] = []
    for st in doc["Statement"]:
        actions = [a for a in st["Action"] if a.startswith("s3:")] if st["Effect"] == "Allow" else []
        if actions:
            out.append({"resources": list(st["Resource"]), "actions": actions})
    return out
