"""IAM documents of the data stores: bucket policies, the pods' S3 access, replication, the registry's
lifecycle and MinIO's policies. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from infra.core.iam import (
    KMS_READ,
    KMS_WRITE,
    OBJECT_READ,
    OBJECT_WRITE,
    RUN_RECORDS,
    Policy,
    in_account,
    keep_outputs,
    keep_run_records,
    policy,
    prefix_pattern,
    s3_key_use,
)
from infra.keys.documents.kms_policy import CRYPTO_ACTIONS


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
    """Trainer pods: read the datasets under ``prefix/`` (the teams' datasets live under ``<team>/``, out of
    its reach); read/write checkpoints and artifacts under ``prefix/`` only, and never ``release/`` of the
    artifacts bucket (published models replicate to production inference; publishing is the publisher's).
    With ``account_id``/``region``: only our account's buckets (``s3:ResourceAccount``) and the data key
    only through S3 for these buckets."""
    pattern = prefix_pattern(prefix)
    written = [checkpoints_arn, artifacts_arn]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "LocateDatasets",
            "Effect": "Allow",
            "Action": ["s3:GetBucketLocation"],
            "Resource": [datasets_arn],
        },
        {
            "Sid": "ListDatasets",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [datasets_arn],
            "Condition": {"StringLike": {"s3:prefix": [pattern, prefix.strip("/")]}},
        },
        {
            "Sid": "ReadDatasets",
            "Effect": "Allow",
            "Action": OBJECT_READ,
            "Resource": [f"{datasets_arn}/{pattern}"],
        },
        {
            "Sid": "ListOwnPrefix",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": written,
            # Listing is a bucket-level action; s3:prefix keeps it inside the trainer's prefix.
            # https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html
            "Condition": {"StringLike": {"s3:prefix": [pattern, prefix.strip("/")]}},
        },
        list_uploads("ListUploads", written),
        {
            "Sid": "ReadWriteOwnPrefix",
            "Effect": "Allow",
            "Action": OBJECT_READ + OBJECT_WRITE,
            "Resource": [f"{arn}/{pattern}" for arn in written],
        },
    ]
    statements = [in_account(st, account_id) for st in statements]
    # An explicit deny wins over any allow, whatever the prefix: a training job never writes a release.
    statements.append(
        {
            "Sid": "NeverWriteReleases",
            "Effect": "Deny",
            "Action": OBJECT_WRITE + ["s3:PutObjectTagging", "s3:PutObjectRetention"],
            "Resource": [f"{artifacts_arn}/{release_prefix}/*"],
        }
    )
    statements += keep_run_records(written)  # its own records too: written once, never removed
    statements += keep_outputs([checkpoints_arn])  # and its outputs, which the publisher signs
    if kms_key_arns:
        statements.append(s3_key_use("UseDataKey", KMS_WRITE, kms_key_arns, [datasets_arn, *written], region))
    return policy(*statements)


def list_uploads(sid: str, bucket_arns: Sequence[str]) -> dict[str, Any]:
    """Listing a bucket's multipart uploads (to abort stale ones). Its request carries no ``s3:prefix``
    key, so under an ``s3:prefix`` condition it is never granted; it lists upload keys, not object data.
    https://docs.aws.amazon.com/service-authorization/latest/reference/list_amazons3.html"""
    return {
        "Sid": sid,
        "Effect": "Allow",
        "Action": ["s3:ListBucketMultipartUploads"],
        "Resource": list(bucket_arns),
    }


def publisher_policy(
    *,
    checkpoints_arn: str,
    source_prefixes: Sequence[str],
    artifacts_arn: str,
    release_prefix: str,
    kms_key_arns: Sequence[str],
    account_id: str | None = None,
    region: str | None = None,
    signing_key_arn: str | None = None,
) -> Policy:
    """The model publisher (``python -m trainer.release.publish --from <HF folder>``): read the Hugging Face
    folders
    under ``source_prefixes`` of the checkpoints bucket (the trainer's output prefix, and the output prefix
    of every team with ``teams.<team>.releases``; never a checkpoint), write new objects under ``release/``
    of the artifacts bucket (the bucket policy requires ``If-None-Match``). No delete: a published version
    stays. With ``signing_key_arn``: sign manifests with the release signing key (the key policy lets no
    other principal sign)."""
    if not source_prefixes:
        raise ValueError("the publisher needs at least one prefix to publish from (the trainer's outputs)")
    sources = [prefix_pattern(p) for p in source_prefixes]
    owners = sorted({p.strip("/").rpartition("/")[0] or p.strip("/") for p in source_prefixes})
    records = [f"{owner}/*/{RUN_RECORDS}/*" for owner in owners]
    release = prefix_pattern(release_prefix)
    statements: list[dict[str, Any]] = [
        # the outputs, and the run records of the same owners' jobs, where the publisher reads a job's
        # TrainJob and image (``<owner>/checkpoints/<job>/run-records/``; written once, infra/core/iam.py
        # keep_run_records): one statement each for listing and reading, as IAM counts every character
        {
            "Sid": "ListOutputsAndRunRecords",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [checkpoints_arn],
            "Condition": {
                "StringLike": {"s3:prefix": [*sources, *(p.strip("/") for p in source_prefixes), *records]}
            },
        },
        {
            "Sid": "ReadOutputsAndRunRecords",
            "Effect": "Allow",
            "Action": OBJECT_READ,
            "Resource": [f"{checkpoints_arn}/{s}" for s in [*sources, *records]],
        },
        {
            "Sid": "ListReleases",
            "Effect": "Allow",
            "Action": ["s3:ListBucket"],
            "Resource": [artifacts_arn],
            "Condition": {"StringLike": {"s3:prefix": [release, release_prefix.strip("/")]}},
        },
        list_uploads("ListUploads", [artifacts_arn]),
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
    statements = [in_account(st, account_id) for st in statements]
    if kms_key_arns:
        statements.append(
            s3_key_use("UseDataKey", KMS_WRITE, kms_key_arns, [checkpoints_arn, artifacts_arn], region)
        )
    if signing_key_arn:
        statements.append(
            {
                "Sid": "SignManifests",
                "Effect": "Allow",
                "Action": ["kms:Sign", "kms:GetPublicKey", "kms:DescribeKey"],
                "Resource": [signing_key_arn],
                # https://docs.aws.amazon.com/kms/latest/developerguide/conditions-kms.html#conditions-kms-signing-algorithm
                "Condition": {"StringEqualsIfExists": {"kms:SigningAlgorithm": SIGNING_ALGORITHM}},
            }
        )
    return policy(*statements)


SIGNING_ALGORITHM = "ECDSA_SHA_256"  # trainer/release/signing.py ALGORITHM
SIGNING_KEY_SPEC = "ECC_NIST_P256"  # trainer/release/signing.py KEY_SPEC


def release_signing_key_policy(
    *,
    account_root_arn: str,
    publisher_role_arn: str,
    key_admin_role_arn: str,
    break_glass_role_arn: str,
    deployer_role_arn: str | None,
    protect: bool,
) -> Policy:
    """Key policy of the release signing key (``ECC_NIST_P256``, ``SIGN_VERIFY``): the account root
    delegates to IAM (AWS's default key policy), only the publisher role may ``kms:Sign`` whatever IAM
    says, the key administrator never uses it, and (``protect``) only break-glass deletes or disables it
    and only break-glass and the deployer change this policy, as for the stack's other keys
    (infra/keys/documents/kms_policy.py).
    https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html
    """
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AccountAdministers",
            "Effect": "Allow",
            "Principal": {"AWS": account_root_arn},
            "Action": ["kms:*"],
            "Resource": "*",
        },
        {
            "Sid": "KeyAdministratorsNeverUseKey",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": [*CRYPTO_ACTIONS, "kms:Sign"],
            "Resource": "*",
            "Condition": {"ArnEquals": {"aws:PrincipalArn": key_admin_role_arn}},
        },
        {
            "Sid": "OnlyPublisherSigns",
            "Effect": "Deny",
            "Principal": {"AWS": "*"},
            "Action": ["kms:Sign"],
            "Resource": "*",
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": publisher_role_arn}},
        },
    ]
    if protect:
        if not deployer_role_arn:
            raise ValueError("a protected key needs the deployer role (it updates the key policy)")
        statements += [
            {
                "Sid": "OnlyBreakGlassDeletesKey",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": ["kms:ScheduleKeyDeletion", "kms:DisableKey"],
                "Resource": "*",
                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": break_glass_role_arn}},
            },
            {
                "Sid": "OnlyBreakGlassAndDeployerChangePolicy",
                "Effect": "Deny",
                "Principal": {"AWS": "*"},
                "Action": ["kms:PutKeyPolicy"],
                "Resource": "*",
                "Condition": {
                    "ArnNotEquals": {"aws:PrincipalArn": [break_glass_role_arn, deployer_role_arn]}
                },
            },
        ]
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
    pattern = prefix_pattern(prefix)
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
    statements = [in_account(st, account_id) for st in statements]
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
    """Deny uploads that ask for another encryption than SSE-KMS under the bucket's key. A request that
    names no encryption gets the bucket default (our key) and passes; so each denial holds only when its
    header is present (``Null: false``): ``StringNotEquals...IfExists`` would be true for an absent header
    and refuse every upload that relies on the default (the trainer's, the publisher's). ``aws:kms``
    without a key id is refused too: S3 would use the AWS managed key ``aws/s3``, not ours.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-kms-encryption.html
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_elements_condition_operators.html
    """
    key_id, algo = "s3:x-amz-server-side-encryption-aws-kms-key-id", "s3:x-amz-server-side-encryption"

    def deny(sid: str, condition: dict[str, Any]) -> dict[str, Any]:
        return {
            "Sid": sid,
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": [f"{bucket_arn}/*"],
            "Condition": condition,
        }

    return [
        deny("DenyOtherKmsKeys", {"Null": {key_id: "false"}, "StringNotEquals": {key_id: key_arn}}),
        deny("DenyOtherEncryption", {"Null": {algo: "false"}, "StringNotEquals": {algo: "aws:kms"}}),
        deny("DenyAwsManagedKey", {"StringEquals": {algo: "aws:kms"}, "Null": {key_id: "true"}}),
    ]


def baseline_denials(bucket_arn: str, min_tls: str) -> list[dict[str, Any]]:
    """The denials every bucket policy of the stack starts with: no plain HTTP, no TLS below ``min_tls``,
    no SSE-C uploads."""
    return [deny_insecure_transport(bucket_arn), deny_old_tls(bucket_arn, min_tls), deny_sse_c(bucket_arn)]


# The data plane of a bucket: objects read, written, deleted, listed, replicated. What a stolen pod token
# would use from outside the VPC (bucket configuration is the admin guard's).
DATA_PLANE_ACTIONS = [
    "s3:GetObject*",
    "s3:PutObject*",
    "s3:DeleteObject*",
    "s3:ListBucket*",
    "s3:ListMultipartUploadParts",
    "s3:AbortMultipartUpload",
    "s3:RestoreObject",
    "s3:Replicate*",
]
# FSx for Lustre reads and writes a linked bucket with its service-linked role, from the service's side
# (https://docs.aws.amazon.com/fsx/latest/LustreGuide/setting-up.html, "Adding permissions to use data
# repositories in Amazon S3": AWSServiceRoleForFSxS3Access_<file system id>).
FSX_S3_ROLE_PATTERN = (
    "arn:{partition}:iam::{account}:role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*"
)


@dataclass(frozen=True, kw_only=True)
class EndpointGuard:
    """Only requests through the stack's S3 gateway endpoint (``endpoint_id``) reach the bucket's data, but
    those of ``exempt`` (principal ARN patterns: S3 replication, break-glass, the deployer, FSx's role),
    which act from outside the VPC."""

    endpoint_id: str
    exempt: tuple[str, ...] = ()


def deny_outside_endpoint(bucket_arn: str, guard: EndpointGuard) -> dict[str, Any]:
    """Deny the :data:`DATA_PLANE_ACTIONS` unless the request came through the stack's gateway endpoint
    (``aws:SourceVpce``; absent outside any endpoint, and StringNotEquals on an absent key matches) or from
    one of ``guard.exempt``. A pod's credentials taken out of the cluster read nothing from the internet.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-bucket-policies-vpc-endpoint.html
    """
    condition: dict[str, Any] = {"StringNotEquals": {"aws:SourceVpce": guard.endpoint_id}}
    if guard.exempt:
        condition["ArnNotLike"] = {"aws:PrincipalArn": list(guard.exempt)}
    return {
        "Sid": "DataOnlyThroughOurEndpoint",
        "Effect": "Deny",
        "Principal": "*",
        "Action": list(DATA_PLANE_ACTIONS),
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": condition,
    }


def bucket_policy(
    bucket_arn: str,
    *,
    kms_key_arn: str | None = None,
    min_tls: str = "1.2",
    release_guard: ReleaseGuard | None = None,
    admins: Sequence[str] = (),
    endpoint: EndpointGuard | None = None,
) -> Policy:
    """Policy of a data bucket: TLS only, TLS ``min_tls`` at least, no SSE-C, (with ``kms_key_arn``) no
    other key or encryption than the bucket's, (with ``endpoint``) data only through the stack's gateway
    endpoint (:func:`deny_outside_endpoint`), with ``release_guard`` the release path's denials
    (:func:`release_guard_statements`, its admins administer the bucket), else with ``admins`` the
    administration guard alone (:func:`admin_guard_statement`)."""
    statements = baseline_denials(bucket_arn, min_tls)
    if kms_key_arn is not None:
        statements += deny_other_kms_keys(bucket_arn, kms_key_arn)
    if endpoint is not None:
        statements.append(deny_outside_endpoint(bucket_arn, endpoint))
    if release_guard is not None:
        if admins and tuple(admins) != release_guard.admins:
            raise ValueError("a bucket with a release guard is administered by the guard's admins")
        statements += release_guard_statements(bucket_arn, release_guard)
    elif admins:
        statements.append(admin_guard_statement(bucket_arn, admins))
    return policy(*statements)


def with_run_records_kept(doc: Policy, bucket_arn: str, *, outputs: bool = False) -> Policy:
    """``doc`` (a data bucket's policy) with the denials that keep run records append-only for every caller
    (infra/core/iam.py ``keep_run_records``), and with ``outputs`` (the checkpoints bucket) the jobs' outputs
    write-once (``keep_outputs``)."""
    kept = keep_outputs([bucket_arn], any_principal=True) if outputs else []
    return policy(*doc["Statement"], *keep_run_records([bucket_arn], any_principal=True), *kept)


# What only the publisher (and break-glass) may do under release/: write a version, or remove one.
RELEASE_WRITE_ACTIONS = ["s3:PutObject", "s3:DeleteObject"]
# What would let anyone undo the release path's guarantees: remove old versions for good, turn versioning
# off, expire or re-route objects, or rewrite (or drop) this very policy. Break-glass and the deployer only.
BUCKET_ADMIN_ACTIONS = [
    "s3:DeleteObjectVersion",
    "s3:PutBucketVersioning",
    "s3:PutLifecycleConfiguration",
    "s3:PutReplicationConfiguration",
    "s3:PutBucketPolicy",
    "s3:DeleteBucketPolicy",
]


@dataclass(frozen=True, kw_only=True)
class ReleaseGuard:
    """Who may change the release path of a bucket (the artifacts bucket and its replicas).

    ``writers``: role ARNs that may put and delete objects under ``prefix/`` (the publisher and break-glass
    in the training region; only break-glass in a replica, which S3 replication fills with
    ``s3:ReplicateObject``, not ``s3:PutObject``). ``admins``: role ARNs that may run the
    :data:`BUCKET_ADMIN_ACTIONS` (break-glass and the deployer that runs ``pulumi up``); empty when the
    stack names no deployer role, so the program never locks itself out of its own bucket.
    """

    prefix: str
    writers: tuple[str, ...]
    admins: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class GuardedBucket:
    """A bucket with a :class:`ReleaseGuard` (or only an administration guard, ``admins``), for the grants
    of the principals the guard exempts: ``region`` is the bucket's, ``key_arn`` the key its objects are
    encrypted with."""

    arn: str
    region: str
    key_arn: str
    guard: ReleaseGuard | None = None
    admins: tuple[str, ...] = ()

    @property
    def writers(self) -> tuple[str, ...]:
        return self.guard.writers if self.guard is not None else ()

    @property
    def administrators(self) -> tuple[str, ...]:
        return self.guard.admins if self.guard is not None else self.admins


# What break-glass reads to act on what it may write or administer (the Get/List side of its allows).
BREAK_GLASS_READ_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion"]
BREAK_GLASS_LIST_ACTIONS = ["s3:ListBucket", "s3:ListBucketVersions"]
BREAK_GLASS_ADMIN_READS = [
    "s3:GetBucketPolicy",
    "s3:GetBucketVersioning",
    "s3:GetLifecycleConfiguration",
    "s3:GetReplicationConfiguration",
]


def break_glass_storage_policy(role_arn: str, buckets: Sequence[GuardedBucket]) -> Policy:
    """The allows behind break-glass's exemptions in the buckets' policies (``release_guard_statements``):
    an exemption from a Deny grants nothing by itself, the principal needs an Allow as well.

    For each bucket whose guard lists ``role_arn`` as a writer: read, write and delete versions under the
    guarded prefix (remove a bad release; create-only still holds: the bucket policy wants If-None-Match);
    as an admin: the :data:`BUCKET_ADMIN_ACTIONS` and what they read; and the bucket key's use through S3 in
    the bucket's region for those objects. The role is assumed only with MFA (its trust policy,
    infra/keys/documents/iam.py ``mfa_trust_policy``) and every assumption alerts."""
    writes = [b for b in buckets if role_arn in b.writers]
    admin = [b for b in buckets if role_arn in b.administrators]
    statements: list[dict[str, Any]] = []
    if writes:
        objects = [f"{b.arn}/{prefix_pattern(b.guard.prefix)}" for b in writes if b.guard is not None]
        statements += [
            {
                "Sid": "RepairReleases",
                "Effect": "Allow",
                "Action": [*BREAK_GLASS_READ_ACTIONS, *RELEASE_WRITE_ACTIONS],
                "Resource": objects,
            },
            {
                "Sid": "ListReleases",
                "Effect": "Allow",
                "Action": BREAK_GLASS_LIST_ACTIONS,
                "Resource": [b.arn for b in writes],
                "Condition": {
                    "StringLike": {
                        "s3:prefix": sorted(
                            {
                                p
                                for b in writes
                                if b.guard is not None
                                for p in (prefix_pattern(b.guard.prefix), b.guard.prefix)
                            }
                        )
                    }
                },
            },
        ]
    if admin:
        statements.append(
            {
                "Sid": "AdministerGuardedBuckets",
                "Effect": "Allow",
                "Action": [*BUCKET_ADMIN_ACTIONS, *BREAK_GLASS_ADMIN_READS],
                "Resource": sorted({a for b in admin for a in (b.arn, f"{b.arn}/*")}),
            }
        )
    for region in sorted({b.region for b in writes}):
        here = [b for b in writes if b.region == region]
        statements.append(
            s3_key_use(
                f"UseReleaseKeys{region.title().replace('-', '')}",
                KMS_WRITE,
                sorted({b.key_arn for b in here}),
                [b.arn for b in here],
                region,
            )
        )
    if not statements:
        raise ValueError(f"{role_arn} is exempted by no bucket guard: nothing to grant")
    return policy(*statements)


def release_guard_statements(bucket_arn: str, guard: ReleaseGuard) -> list[dict[str, Any]]:
    """Bucket policy denials that make ``<prefix>/`` the publisher's, create-only, and the bucket's
    versioning, lifecycle, replication and policy the deployer's and break-glass's.

    A Deny with ``Principal: *`` and ``aws:PrincipalArn`` binds every identity of the account, whatever its
    IAM policy says, and needs no principal to exist (a negated operator with several values matches a
    principal equal to none of them).
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_condition-keys.html#condition-keys-principalarn

    Create-only: ``PutObject`` and ``CompleteMultipartUpload`` (both authorised as ``s3:PutObject``) must
    carry ``If-None-Match`` (condition key ``s3:if-none-match``); ``CreateMultipartUpload`` and
    ``UploadPart`` take no conditional header and are exempted with ``s3:ObjectCreationOperation`` (false
    for them). CopyObject into the prefix is refused as a consequence (S3 does not copy conditionally).
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes-enforce.html
    The account root may always put or delete a bucket policy, whatever it says (the way back from a
    wrong deployer role).
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-bucket-policies.html
    """
    if not guard.writers:
        raise ValueError("a release guard needs at least one writer (the publisher, or break-glass)")
    objects = [f"{bucket_arn}/{prefix_pattern(guard.prefix)}"]
    statements: list[dict[str, Any]] = [
        {
            "Sid": "OnlyPublisherWritesReleases",
            "Effect": "Deny",
            "Principal": "*",
            "Action": list(RELEASE_WRITE_ACTIONS),
            "Resource": objects,
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": list(guard.writers)}},
        },
        {
            "Sid": "ReleaseWritesCreateOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:PutObject",
            "Resource": objects,
            "Condition": {
                "Null": {"s3:if-none-match": "true"},
                "Bool": {"s3:ObjectCreationOperation": "true"},
            },
        },
    ]
    if guard.admins:
        statements.append(admin_guard_statement(bucket_arn, guard.admins))
    return statements


def admin_guard_statement(bucket_arn: str, admins: Sequence[str]) -> dict[str, Any]:
    """The bucket policy Deny that leaves the :data:`BUCKET_ADMIN_ACTIONS` (remove versions for good,
    versioning, lifecycle, replication, the policy itself) to ``admins`` (break-glass and the deployer):
    every data bucket has it (the artifacts bucket through its :class:`ReleaseGuard`)."""
    if not admins:
        raise ValueError("an administration guard names its admins (break-glass and the deployer)")
    return {
        "Sid": "OnlyBreakGlassAndDeployerAdministerBucket",
        "Effect": "Deny",
        "Principal": "*",
        "Action": list(BUCKET_ADMIN_ACTIONS),
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"ArnNotEquals": {"aws:PrincipalArn": list(admins)}},
    }


def access_log_bucket_policy(
    log_bucket_arn: str, source_bucket_arns: Sequence[str], account_id: str, *, min_tls: str = "1.2"
) -> Policy:
    """Policy of the access-log bucket: TLS only, and the S3 logging service may write for our buckets only.

    https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html#grant-log-delivery-permissions-general
    """
    return policy(
        *baseline_denials(log_bucket_arn, min_tls),
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


# The Elastic Load Balancing account of each Region opened before August 2022: their load balancers deliver
# access logs as this account; Regions opened since (None here) as the service principal below.
# https://docs.aws.amazon.com/elasticloadbalancing/latest/application/enable-access-logging.html (Step 2)
ELB_LOG_ACCOUNTS: dict[str, str | None] = {
    "us-east-1": "127311923021",
    "us-east-2": "033677994240",
    "us-west-1": "027434742980",
    "us-west-2": "797873946194",
    "af-south-1": "098369216593",
    "ap-east-1": "754344448648",
    "ap-south-1": "718504428378",
    "ap-northeast-1": "582318560864",
    "ap-northeast-2": "600734575887",
    "ap-northeast-3": "383597477331",
    "ap-southeast-1": "114774131450",
    "ap-southeast-2": "783225319266",
    "ap-southeast-3": "589379963580",
    "ca-central-1": "985666609251",
    "eu-central-1": "054676820928",
    "eu-west-1": "156460612806",
    "eu-west-2": "652711504416",
    "eu-west-3": "009996457667",
    "eu-south-1": "635631232127",
    "eu-north-1": "897822967062",
    "me-south-1": "076674570225",
    "sa-east-1": "507241528517",
    **dict.fromkeys(
        ["ap-east-2", "ap-south-2", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6", "ap-southeast-7"]
        + ["ca-west-1", "eu-central-2", "eu-south-2", "il-central-1", "me-central-1", "mx-central-1"]
    ),
}
ELB_LOG_SERVICE = "logdelivery.elasticloadbalancing.amazonaws.com"
# Where the inference ALBs of a Region write in its access-log bucket: <ALB_LOG_PREFIX>/<stack>/AWSLogs/...
ALB_LOG_PREFIX = "alb"


def load_balancer_log_delivery(
    log_bucket_arn: str, *, account_id: str, region: str, partition: str = "aws"
) -> dict[str, Any]:
    """Elastic Load Balancing may write access logs of this account's load balancers under
    ``alb/<stack>/AWSLogs/<account>/`` of the access-log bucket (same Region as the load balancers, SSE-S3
    as ALB logs require): as the Region's ELB account where it has one, else as the log delivery service."""
    elb = ELB_LOG_ACCOUNTS.get(region)
    principal = (
        {"AWS": f"arn:{partition}:iam::{elb}:root"} if elb is not None else {"Service": ELB_LOG_SERVICE}
    )
    return {
        "Sid": "LoadBalancerAccessLogs",
        "Effect": "Allow",
        "Principal": principal,
        "Action": "s3:PutObject",
        "Resource": [f"{log_bucket_arn}/{ALB_LOG_PREFIX}/*/AWSLogs/{account_id}/*"],
    }


def with_load_balancer_logs(
    doc: Policy, log_bucket_arn: str, *, account_id: str, region: str, partition: str = "aws"
) -> Policy:
    """``doc`` (the access-log bucket's policy) with the load balancers' log delivery."""
    grant = load_balancer_log_delivery(
        log_bucket_arn, account_id=account_id, region=region, partition=partition
    )
    return policy(*doc["Statement"], grant)


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
            "Resource": [f"{source_bucket_arn}/{prefix_pattern(prefix)}"],
        },
        {
            "Sid": "ReplicateIntoDestinations",
            "Effect": "Allow",
            "Action": ["s3:ReplicateObject", "s3:ReplicateTags"],
            "Resource": [f"{b}/{prefix_pattern(prefix)}" for b in dest_buckets],
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


# What writes an image into a repository (docker push: layer uploads, then the manifest) or removes one.
# https://docs.aws.amazon.com/AmazonECR/latest/userguide/image-push-iam.html
ECR_PUSH_ACTIONS = [
    "ecr:InitiateLayerUpload",
    "ecr:UploadLayerPart",
    "ecr:CompleteLayerUpload",
    "ecr:PutImage",
    "ecr:BatchDeleteImage",
]
# What a pusher reads while pushing (which layers exist) and to check what it pushed.
ECR_PUSHER_READ_ACTIONS = [
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:GetDownloadUrlForLayer",
    "ecr:DescribeImages",
    "ecr:DescribeImageScanFindings",
    "ecr:ListImages",
]
# What would undo the repository's guarantees (who pushes, immutable tags, scanning, expiry) or remove it:
# the deployer's and break-glass's only.
ECR_ADMIN_ACTIONS = [
    "ecr:SetRepositoryPolicy",
    "ecr:DeleteRepositoryPolicy",
    "ecr:DeleteRepository",
    "ecr:PutImageTagMutability",
    "ecr:PutImageScanningConfiguration",
    "ecr:PutLifecyclePolicy",
    "ecr:DeleteLifecyclePolicy",
]


def platform_repository_policy(*, pushers: Sequence[str], admins: Sequence[str]) -> Policy:
    """The repository policy of the platform's own ECR repositories (the trainer, the release fetch tool,
    vLLM): only ``pushers`` (the deployer, whose ``pulumi up`` builds and pushes them: infra/training
    component/images.py) push or delete images, and only ``admins`` (the deployer and break-glass) change
    the repository. Pulls are the nodes' (their role's AmazonEC2ContainerRegistryPullOnly; same account,
    so no Allow is needed here), and ECR replication copies images with ``ecr:ReplicateImage`` as the
    service, not a push.

    A Deny with ``Principal: *`` and a negated ``aws:PrincipalArn`` binds every identity of the account,
    whatever its IAM policy says. https://docs.aws.amazon.com/AmazonECR/latest/userguide/repository-policies.html
    """
    if not pushers or not admins:
        raise ValueError("a platform repository policy names its pushers and admins (the deployer role)")
    return policy(
        {
            "Sid": "OnlyDeployerPushes",
            "Effect": "Deny",
            "Principal": "*",
            "Action": list(ECR_PUSH_ACTIONS),
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(pushers)}},
        },
        {
            "Sid": "OnlyAdminsChangeTheRepository",
            "Effect": "Deny",
            "Principal": "*",
            "Action": list(ECR_ADMIN_ACTIONS),
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(admins)}},
        },
    )


def platform_replica_repository_policy(*, admins: Sequence[str]) -> Policy:
    """The policy ECR gives the replicas of the platform's repositories in the inference regions (through
    the registry's creation template): images arrive by replication, so nobody pushes there, and only
    ``admins`` change them."""
    if not admins:
        raise ValueError("a replica repository policy names its admins (the deployer role)")
    return policy(
        {"Sid": "ReplicasAreNotPushed", "Effect": "Deny", "Principal": "*", "Action": list(ECR_PUSH_ACTIONS)},
        {
            "Sid": "OnlyAdminsChangeTheRepository",
            "Effect": "Deny",
            "Principal": "*",
            "Action": list(ECR_ADMIN_ACTIONS),
            "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(admins)}},
        },
    )


def registry_break_glass_policy(*, repository_arns: Sequence[str]) -> Policy:
    """The allow behind break-glass's exemption in the platform's and the teams' repository policies (and
    their replicas'): an exemption from a Deny alone grants nothing. ``repository_arns``: the platform's
    repositories and the teams' name prefix (``<ECR namespace>/teams/*``, infra/core/teams.py) in every
    region, so the document does not grow with the teams."""
    return policy(
        {
            "Sid": "AdministerRepositories",
            "Effect": "Allow",
            "Action": list(ECR_ADMIN_ACTIONS),
            "Resource": sorted(repository_arns),
        }
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
