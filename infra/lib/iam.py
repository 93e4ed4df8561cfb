"""IAM policy documents as data: trust policies, pod permissions, bucket policies, replication.

Pure functions from ARNs/names to policy dicts (``json.dumps`` them at the call site). No Pulumi imports,
so every document is table-tested in ``tests/infra/lib/test_iam.py``. Least privilege throughout: no
``Allow`` statement has a wildcard principal or a ``*`` resource, except where AWS allows nothing else:
the S3 gateway endpoint policy (an endpoint policy's principal is ``*``; its resources are named), the
Session Manager channel actions and ``logs:DescribeLogGroups``, ``kms:ListKeys``/``ListAliases`` (no
resource-level permissions).
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


def _in_account(statement: dict[str, Any], account_id: str | None) -> dict[str, Any]:
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


def trainer_policy(
    *,
    datasets_arn: str,
    checkpoints_arn: str,
    artifacts_arn: str,
    prefix: str,
    kms_key_arns: Sequence[str],
    account_id: str | None = None,
    region: str | None = None,
    release_prefix: str = "release",
) -> Policy:
    """Trainer pods: read all datasets; read/write checkpoints and artifacts under ``prefix/`` only, and
    never ``release/`` of the artifacts bucket (published models replicate to production inference;
    publishing is the publisher's). With ``account_id``/``region``: only our account's buckets
    (``s3:ResourceAccount``) and the data key only through S3 for these buckets."""
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
    statements = [_in_account(st, account_id) for st in statements]
    # An explicit deny wins over any allow, whatever the prefix: a training job never writes a release.
    statements.append(
        {
            "Sid": "NeverWriteReleases",
            "Effect": "Deny",
            "Action": OBJECT_WRITE + ["s3:PutObjectTagging", "s3:PutObjectRetention"],
            "Resource": [f"{artifacts_arn}/{release_prefix}/*"],
        }
    )
    if kms_key_arns:
        statements.append(s3_key_use("UseDataKey", KMS_WRITE, kms_key_arns, [datasets_arn, *written], region))
    return policy(*statements)


def publisher_policy(
    *,
    checkpoints_arn: str,
    checkpoints_prefix: str,
    artifacts_arn: str,
    release_prefix: str,
    kms_key_arns: Sequence[str],
    account_id: str | None = None,
    region: str | None = None,
) -> Policy:
    """The model publisher (``python -m trainer.publish``): read the trainer's checkpoints, write new
    objects under ``release/`` of the artifacts bucket. No delete: a published version stays."""
    ckpt = _prefix_pattern(checkpoints_prefix)
    release = _prefix_pattern(release_prefix)
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ListCheckpoints",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [checkpoints_arn],
            "Condition": {"StringLike": {"s3:prefix": [ckpt, checkpoints_prefix.strip("/")]}},
        },
        {
            "Sid": "ReadCheckpoints",
            "Effect": "Allow",
            "Action": OBJECT_READ,
            "Resource": [f"{checkpoints_arn}/{ckpt}"],
        },
        {
            "Sid": "ListReleases",
            "Effect": "Allow",
            "Action": ["s3:ListBucket", "s3:ListBucketMultipartUploads"],
            "Resource": [artifacts_arn],
            "Condition": {"StringLike": {"s3:prefix": [release, release_prefix.strip("/")]}},
        },
        {
            "Sid": "WriteReleases",
            "Effect": "Allow",
            "Action": [
                *OBJECT_READ,
                "s3:PutObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            "Resource": [f"{artifacts_arn}/{release}"],
        },
    ]
    statements = [_in_account(st, account_id) for st in statements]
    if kms_key_arns:
        statements.append(
            s3_key_use("UseDataKey", KMS_WRITE, kms_key_arns, [checkpoints_arn, artifacts_arn], region)
        )
    return policy(*statements)


def inference_policy(
    *,
    artifacts_arn: str,
    prefix: str,
    kms_key_arns: Sequence[str],
    account_id: str | None = None,
    region: str | None = None,
) -> Policy:
    """Inference pods: read model artifacts under ``prefix/`` (``release/``) and nothing else."""
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
    statements = [_in_account(st, account_id) for st in statements]
    if kms_key_arns:
        statements.append(s3_key_use("DecryptArtifacts", KMS_READ, kms_key_arns, [artifacts_arn], region))
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


def deny_old_tls(bucket_arn: str, min_tls: str) -> dict[str, Any]:
    """Deny requests over a TLS version below ``min_tls`` (1.2 or 1.3).

    https://repost.aws/knowledge-center/s3-enforce-modern-tls
    """
    return {
        "Sid": "DenyOldTls",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"NumericLessThan": {"s3:TlsVersion": min_tls}},
    }


def deny_sse_c(bucket_arn: str) -> dict[str, Any]:
    """Deny uploads encrypted with a customer-provided key (SSE-C): we could not read them, and an
    attacker could make data unreadable to us. New buckets also block SSE-C in their encryption settings.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-s3-c-encryption.html
    """
    return {
        "Sid": "DenySseC",
        "Effect": "Deny",
        "Principal": "*",
        "Action": "s3:PutObject",
        "Resource": [f"{bucket_arn}/*"],
        "Condition": {"Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "false"}},
    }


def deny_other_kms_keys(bucket_arn: str, key_arn: str) -> list[dict[str, Any]]:
    """Deny uploads that ask for another encryption than SSE-KMS under the bucket's key. Requests that name
    no key get the bucket default (our key), hence ``IfExists``.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-kms-encryption.html
    """
    return [
        {
            "Sid": "DenyOtherKmsKeys",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": [f"{bucket_arn}/*"],
            "Condition": {
                "StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption-aws-kms-key-id": key_arn}
            },
        },
        {
            "Sid": "DenyOtherEncryption",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": [f"{bucket_arn}/*"],
            "Condition": {"StringNotEqualsIfExists": {"s3:x-amz-server-side-encryption": "aws:kms"}},
        },
    ]


def _baseline_denials(bucket_arn: str, min_tls: str) -> list[dict[str, Any]]:
    """The denials every bucket policy of the stack starts with: no plain HTTP, no TLS below ``min_tls``,
    no SSE-C uploads."""
    return [deny_insecure_transport(bucket_arn), deny_old_tls(bucket_arn, min_tls), deny_sse_c(bucket_arn)]


def bucket_policy(bucket_arn: str, *, kms_key_arn: str | None = None, min_tls: str = "1.2") -> Policy:
    """Policy of a data bucket: TLS only, TLS ``min_tls`` at least, no SSE-C, and (with ``kms_key_arn``) no
    other key or encryption than the bucket's."""
    statements = _baseline_denials(bucket_arn, min_tls)
    if kms_key_arn is not None:
        statements += deny_other_kms_keys(bucket_arn, kms_key_arn)
    return policy(*statements)


def access_log_bucket_policy(
    log_bucket_arn: str, source_bucket_arns: Sequence[str], account_id: str, *, min_tls: str = "1.2"
) -> Policy:
    """Policy of the access-log bucket: TLS only, and the S3 logging service may write for our buckets only.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html#grant-log-delivery-permissions-general
    """
    return policy(
        *_baseline_denials(log_bucket_arn, min_tls),
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


def replication_policy(
    *,
    source_bucket_arn: str,
    source_key_arn: str,
    source_region: str,
    destinations: Sequence[tuple[str, str, str]],
    prefix: str = "release",
) -> Policy:
    """What the S3 replication role may do: read versions under ``prefix/`` from the source, replicate them
    into each destination. No ``s3:ReplicateDelete``: delete markers are not replicated, so a delete in the
    training region never removes a model the inference regions serve.

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
            "Resource": [f"{source_bucket_arn}/{_prefix_pattern(prefix)}"],
        },
        {
            "Sid": "ReplicateIntoDestinations",
            "Effect": "Allow",
            "Action": ["s3:ReplicateObject", "s3:ReplicateTags"],
            "Resource": [f"{b}/{_prefix_pattern(prefix)}" for b in dest_buckets],
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


# Buckets of other accounts that nodes read through the S3 gateway endpoint (s3:ResourceAccount cannot name
# them): ECR image layers, the Amazon Linux 2023 package repositories, and registry.k8s.io's mirror in the
# region (registry.k8s.io redirects clients on AWS to it: prod-registry-k8s-io-<region>, where one exists).
# https://docs.aws.amazon.com/AmazonECR/latest/userguide/vpc-endpoints.html#ecr-setting-up-s3-gateway
# https://docs.aws.amazon.com/linux/al2023/ug/managing-repos-os-updates.html (al2023-repos-<region>-de612dc2)
# https://github.com/kubernetes/registry.k8s.io (the S3 mirrors)
#
# Public registries whose blob storage is one S3 bucket, by the bucket's region (review finding F3). A
# gateway endpoint only carries requests to S3 in its own region (the route uses that region's S3 prefix
# list; https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html), so the policy filters
# these pulls only in that region; from any other region they leave outside the endpoint (NAT gateway)
# and its policy never sees them, so other regions' endpoint policies are not widened.
# * quay.io (kube-prometheus-stack's Prometheus/Alertmanager/operator/config-reloader/node-exporter,
#   Grafana's k8s-sidecar, cert-manager's jetstack images): blobs live in ``quayio-production-s3``
#   (us-east-1); quay.io answers blob GETs from us-east-1 with a 302 straight to that bucket
#   (``s3.us-east-1.amazonaws.com/quayio-production-s3/...`` or ``quayio-production-s3.s3.amazonaws.com``)
#   instead of ``cdnNN.quay.io``. Sources: konflux-ci/caching ADR/0001-caching-container-image-layers.md
#   ("Direct S3 URLs: Used in us-east-1 region for direct blob storage access"), and Red Hat's OpenShift
#   firewall configuration: "quayio-production-s3.s3.amazonaws.com - Required to access Quay image content
#   in AWS" https://docs.redhat.com/en/documentation/openshift_container_platform/4.19/html/
#   installation_configuration/configuring-firewall
# * Docker Hub (Grafana's ``docker.io/grafana/grafana``): the same konflux-ci ADR lists a "Docker Hub S3
#   backend", ``docker-images-prod.s3*.amazonaws.com/registry-v2/docker/registry/v2/blobs/...``, beside its
#   Cloudflare hosts. Docker's own allowlist names only Cloudflare/CloudFront hosts for pulls
#   (production.cloudflare.docker.com, production.cloudfront.docker.com, an R2 bucket named
#   docker-images-prod; https://docs.docker.com/desktop/setup/allow-list/), which never pass through the
#   endpoint. The S3 bucket's region is not documented: it is listed under us-east-1 (the ADR's S3 redirects
#   are us-east-1's); if it lives elsewhere the entry is inert, since no other region's traffic reaches a
#   us-east-1 endpoint. Not verified by a pull from a private subnet.
REGISTRY_BACKEND_BUCKETS: dict[str, tuple[str, ...]] = {
    "us-east-1": ("quayio-production-s3", "docker-images-prod"),
}


def aws_node_buckets(region: str, partition: str = "aws") -> list[str]:
    """ARNs of the objects of other accounts that nodes fetch through S3 in ``region``: AWS's (ECR
    layers, AL2023 repositories, registry.k8s.io's mirror) and, in the region that holds them, the S3
    backends of public registries (:data:`REGISTRY_BACKEND_BUCKETS`)."""
    backends = REGISTRY_BACKEND_BUCKETS.get(region, ()) if partition == "aws" else ()
    return [
        f"arn:{partition}:s3:::prod-{region}-starport-layer-bucket/*",
        f"arn:{partition}:s3:::al2023-repos-{region}-de612dc2/*",
        f"arn:{partition}:s3:::prod-registry-k8s-io-{region}/*",
        *(f"arn:{partition}:s3:::{bucket}/*" for bucket in backends),
    ]


def s3_endpoint_policy(*, bucket_names: Sequence[str], region: str, partition: str = "aws") -> Policy:
    """Policy of the VPC's S3 gateway endpoint: our buckets (any action, the bucket policies and IAM
    decide the rest) and reads of the AWS-owned buckets nodes need; nothing else leaves through it.

    https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html#edit-vpc-endpoint-policy-s3
    """
    ours = [f"arn:{partition}:s3:::{b}" for b in sorted(set(bucket_names))]
    statements: list[dict[str, Any]] = []
    if ours:
        statements.append(
            {
                "Sid": "OurBuckets",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:*",
                "Resource": [a for arn in ours for a in (arn, f"{arn}/*")],
            }
        )
    statements.append(
        {
            "Sid": "AwsBucketsNodesRead",
            "Effect": "Allow",
            "Principal": "*",
            "Action": ["s3:GetObject"],
            "Resource": aws_node_buckets(region, partition),
        }
    )
    return policy(*statements)


def cloudtrail_bucket_policy(
    *, bucket_arn: str, trail_arn: str, account_id: str, min_tls: str = "1.2"
) -> Policy:
    """Policy of the trail bucket: CloudTrail (for our trail only) checks the ACL and writes under
    ``AWSLogs/<account>/``; TLS only.

    https://docs.aws.amazon.com/awscloudtrail/latest/userguide/create-s3-bucket-policy-for-cloudtrail.html
    """
    source = {"StringEquals": {"aws:SourceArn": trail_arn}}
    return policy(
        *_baseline_denials(bucket_arn, min_tls),
        {
            "Sid": "CloudTrailAclCheck",
            "Effect": "Allow",
            "Principal": {"Service": "cloudtrail.amazonaws.com"},
            "Action": "s3:GetBucketAcl",
            "Resource": bucket_arn,
            "Condition": source,
        },
        {
            "Sid": "CloudTrailWrite",
            "Effect": "Allow",
            "Principal": {"Service": "cloudtrail.amazonaws.com"},
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/AWSLogs/{account_id}/*",
            "Condition": {
                "StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control", "aws:SourceArn": trail_arn}
            },
        },
    )


def session_manager_policy(log_group_arn: str) -> Policy:
    """What the SSM agent on a node needs for Session Manager, with session logs to one log group.
    Replaces AmazonSSMManagedInstanceCore (which also allows ssm:GetParameter* on every parameter).

    https://docs.aws.amazon.com/systems-manager/latest/userguide/getting-started-create-iam-instance-profile.html
    """
    return policy(
        {
            "Sid": "SessionManagerChannels",
            "Effect": "Allow",
            "Action": [
                "ssm:UpdateInstanceInformation",
                "ssmmessages:CreateControlChannel",
                "ssmmessages:CreateDataChannel",
                "ssmmessages:OpenControlChannel",
                "ssmmessages:OpenDataChannel",
            ],
            "Resource": "*",  # these actions take no resource: https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazonsessionmanagermessagegatewayservice.html
        },
        {
            "Sid": "SessionLogs",
            "Effect": "Allow",
            "Action": ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
            "Resource": [log_group_arn, f"{log_group_arn}:*"],
        },
        {
            "Sid": "SessionLogGroupEncryptionCheck",
            "Effect": "Allow",
            "Action": ["logs:DescribeLogGroups"],
            "Resource": "*",  # DescribeLogGroups has no resource-level permission
        },
    )


def key_admin_policy(*, account_id: str, partition: str, keyset_tag: str) -> Policy:
    """The key administrator role: manage the stack's keys (tagged ``aiplat:keyset``), never use them.

    The key policies also deny it every cryptographic action, so a broader IAM policy cannot give it one.
    https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#key-policy-default-allow-administrators
    """
    return policy(
        {
            "Sid": "AdministerStackKeys",
            "Effect": "Allow",
            "Action": KEY_ADMIN_ACTIONS,
            "Resource": f"arn:{partition}:kms:*:{account_id}:key/*",
            "Condition": {"StringEquals": {"aws:ResourceTag/aiplat:keyset": keyset_tag}},
        },
        {
            "Sid": "ListKeys",
            "Effect": "Allow",
            "Action": ["kms:ListKeys", "kms:ListAliases"],
            "Resource": "*",
        },
    )


def break_glass_policy(*, account_id: str, partition: str, keyset_tag: str, cluster_arn: str) -> Policy:
    """The break-glass role: the only principal the key policies let schedule deletion of (or disable) a
    protected key, and able to turn off the cluster's deletion protection, to remove a stack on purpose."""
    return policy(
        {
            "Sid": "DeleteStackKeys",
            "Effect": "Allow",
            "Action": [
                "kms:ScheduleKeyDeletion",
                "kms:CancelKeyDeletion",
                "kms:DisableKey",
                "kms:EnableKey",
                "kms:DescribeKey",
            ],
            "Resource": f"arn:{partition}:kms:*:{account_id}:key/*",
            "Condition": {"StringEquals": {"aws:ResourceTag/aiplat:keyset": keyset_tag}},
        },
        {
            "Sid": "UnprotectCluster",
            "Effect": "Allow",
            "Action": ["eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:DeleteCluster"],
            "Resource": cluster_arn,
        },
    )


# Administrative KMS actions (the default key policy's key-administrator list) without any cryptographic
# operation and without kms:CreateGrant, which could hand the holder a decrypt grant.
KEY_ADMIN_ACTIONS = [
    "kms:Describe*",
    "kms:List*",
    "kms:Get*",
    "kms:Put*",
    "kms:Update*",
    "kms:Enable*",
    "kms:Revoke*",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:CreateAlias",
    "kms:DeleteAlias",
    "kms:RotateKeyOnDemand",
]


def alerts_topic_policy(*, topic_arn: str, rule_arns: Sequence[str], account_id: str) -> Policy:
    """SNS topic policy: EventBridge may publish for our rules only.

    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions
    """
    return policy(
        {
            "Sid": "EventBridgePublishes",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": topic_arn,
            "Condition": {
                "ArnEquals": {"aws:SourceArn": list(rule_arns)},
                "StringEquals": {"aws:SourceAccount": account_id},
            },
        }
    )


def event_forward_policy(bus_arn: str) -> Policy:
    """What EventBridge needs to forward a rule's events to the default bus of another region."""
    return policy(
        {"Sid": "PutEventsHome", "Effect": "Allow", "Action": "events:PutEvents", "Resource": bus_arn}
    )


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
