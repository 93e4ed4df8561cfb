"""S3 buckets: public access blocked, TLS only with a version floor, versioning, lifecycle, object lock.

Stack rules: a bucket's settings are separate resources in pulumi-aws v7 (``BucketVersioning``,
``BucketPolicy``, ...), tied to their bucket by property dependency or by the bucket's name.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator
from typing import Any

from . import iamdoc
from .audit import TRAIL
from .aws import BUCKET_TYPES, bucket_of, linked
from .core import (
    CRITICAL,
    HIGH,
    LOW,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    deferred_unknowns,
    dig,
    number,
    stack_rule,
    truthy,
    violation,
)

PAB_TYPES = ("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",)
ACCOUNT_PAB = "aws:s3/accountPublicAccessBlock:AccountPublicAccessBlock"
POLICY_TYPES = ("aws:s3/bucketPolicy:BucketPolicy",)
VERSIONING_TYPES = (
    "aws:s3/bucketVersioning:BucketVersioning",
    "aws:s3/bucketVersioningV2:BucketVersioningV2",
)
LIFECYCLE_TYPES = (
    "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration",
    "aws:s3/bucketLifecycleConfigurationV2:BucketLifecycleConfigurationV2",
)
OBJECT_LOCK_TYPES = (
    "aws:s3/bucketObjectLockConfiguration:BucketObjectLockConfiguration",
    "aws:s3/bucketObjectLockConfigurationV2:BucketObjectLockConfigurationV2",
)
PAB_FLAGS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def settings_of(bucket: Res, stack: Stack, types: tuple[str, ...]) -> list[Res]:
    """The ``types`` resources configuring ``bucket``."""
    buckets = stack.of_type(*BUCKET_TYPES)
    return [s for s in stack.of_type(*types) if bucket_of(s, buckets) is bucket]


@stack_rule(
    "s3-public-access-block",
    description="Every bucket blocks public access with all four S3 Block Public Access settings.",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/access-control-block-public-access.html",
    unknowns="An unknown flag is a violation (the flags are literals).",
)
def s3_public_access_block(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    fix = "add a BucketPublicAccessBlock with all four settings true"
    account = stack.of_type(ACCOUNT_PAB)
    account_blocks = any(all(truthy(a.get(f)) is True for f in PAB_FLAGS) for a in account)
    for bucket in stack.of_type(*BUCKET_TYPES):
        blocks = settings_of(bucket, stack, PAB_TYPES)
        if not blocks:
            if not account_blocks:
                yield violation(f"bucket {bucket.name!r} has no public access block", fix, bucket.urn)
            continue
        off = [f for f in PAB_FLAGS if truthy(blocks[0].get(f)) is not True]
        if off:
            yield violation(f"bucket {bucket.name!r} does not set {off}", fix, bucket.urn)


def _bucket_arns(bucket: Res) -> tuple[str, str] | None:
    name = bucket.get("bucket")
    if not isinstance(name, str):
        return None
    return f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"


def _covers(patterns: list[str], arn: str) -> bool:
    return any(
        fnmatch.fnmatchcase(arn, p.replace("arn:aws-cn:", "arn:aws:").replace("arn:aws-us-gov:", "arn:aws:"))
        for p in patterns
    )


def _denies_everyone(stmt: dict[str, Any], bucket: Res) -> bool:
    """A Deny for every principal and every S3 action on the bucket and its objects."""
    if stmt.get("Effect") != "Deny":
        return False
    if not any(iamdoc.is_wildcard_principal(*p) for p in iamdoc.principals(stmt)):
        return False
    if not any(
        iamdoc.action_matches(a, "s3:GetObject") and iamdoc.action_matches(a, "s3:PutObject")
        for a in iamdoc.actions(stmt)
    ):
        return False
    arns = _bucket_arns(bucket)
    res = iamdoc.resources(stmt)
    if arns is None:  # name unknown: the statement must at least name a bucket and its objects
        return any(r.endswith("/*") for r in res) and any(not r.endswith("/*") for r in res)
    return all(_covers(res, arn) for arn in arns)


def _policy_statements(bucket: Res, stack: Stack) -> list[dict[str, Any]] | Any:
    policies = settings_of(bucket, stack, POLICY_TYPES)
    if not policies:
        return []
    stmts = iamdoc.statements(policies[0].get("policy"))
    return stmts


def unknown_bucket_policy(r: Res) -> list[str]:
    """``["policy"]`` when a bucket policy's document is unknown (deferred at preview)."""
    if r.type in POLICY_TYPES and iamdoc.statements(r.get("policy")) is UNKNOWN:
        return ["policy"]
    return []


def _unknown_policy(bucket: Res, ctx: Ctx, fix: str) -> Iterator[Violation]:
    """Outside a preview an unknown bucket policy is refused; at preview checked-at-update lists it."""
    if not ctx.at_preview:
        yield violation(
            f"the policy of bucket {bucket.name!r} is unknown outside a preview and cannot be reviewed",
            fix,
            bucket.urn,
        )


@stack_rule(
    "s3-tls-only",
    description="Every bucket policy denies requests that do not use TLS (aws:SecureTransport false), for "
    "the bucket and its objects.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/security-best-practices.html#transit",
    unknowns=deferred_unknowns("policy document", kind="stack")
    + " An unknown bucket name needs a statement naming a bucket and its objects.",
    defers=unknown_bucket_policy,
)
def s3_tls_only(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    fix = (
        "add a Deny statement for Principal '*', Action 's3:*', Resource the bucket and bucket/*, "
        "Condition Bool aws:SecureTransport 'false'"
    )
    for bucket in stack.of_type(*BUCKET_TYPES):
        stmts = _policy_statements(bucket, stack)
        if stmts is UNKNOWN:
            yield from _unknown_policy(bucket, ctx, fix)
            continue
        ok = any(
            _denies_everyone(s, bucket)
            and any(
                truthy(v) is False
                for op, v in iamdoc.condition_keys(s).get("aws:securetransport", [])
                if op == "Bool"
            )
            for s in stmts
        )
        if not ok:
            yield violation(f"bucket {bucket.name!r} accepts requests without TLS", fix, bucket.urn)


@stack_rule(
    "s3-tls-floor",
    description="Every bucket policy denies TLS versions below the floor (s3:TlsVersion, 1.2 by default).",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html#example-object-tls-version",
    unknowns=deferred_unknowns("policy document", kind="stack"),
    defers=unknown_bucket_policy,
    config={
        "minTlsVersion": {
            "type": "number",
            "enum": [1.2, 1.3],
            "default": 1.2,
            "description": "Oldest TLS version a bucket accepts.",
        }
    },
)
def s3_tls_floor(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    floor = float(ctx.config["minTlsVersion"])
    fix = (
        f"add a Deny statement for Principal '*', Action 's3:*' on the bucket and bucket/* with Condition "
        f"NumericLessThan s3:TlsVersion '{floor}'"
    )
    for bucket in stack.of_type(*BUCKET_TYPES):
        stmts = _policy_statements(bucket, stack)
        if stmts is UNKNOWN:
            yield from _unknown_policy(bucket, ctx, fix)
            continue
        ok = False
        for s in stmts:
            if not _denies_everyone(s, bucket):
                continue
            for op, value in iamdoc.condition_keys(s).get("s3:tlsversion", []):
                limits = [number(v) for v in as_list(value)]
                if op == "NumericLessThan" and any(isinstance(v, float) and v >= floor for v in limits):
                    ok = True
        if not ok:
            yield violation(f"bucket {bucket.name!r} accepts TLS older than {floor}", fix, bucket.urn)


def _versioned(bucket: Res, stack: Stack) -> Any:
    configs = settings_of(bucket, stack, VERSIONING_TYPES)
    if configs:
        return dig(configs[0].props, "versioningConfiguration", "status")
    inline = truthy(dig(bucket.props, "versioning", "enabled"))  # pre-v7 inline versioning
    return "Enabled" if inline is True else inline


@stack_rule(
    "s3-versioning",
    description="Every bucket keeps object versions (overwrites and deletes can be undone).",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/Versioning.html",
    unknowns="An unknown status is a violation (it is a literal).",
)
def s3_versioning(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    for bucket in stack.of_type(*BUCKET_TYPES):
        status = _versioned(bucket, stack)
        if status != "Enabled":
            yield violation(
                f"bucket {bucket.name!r} is not versioned (status {status})",
                "add a BucketVersioning with status 'Enabled'",
                bucket.urn,
            )


@stack_rule(
    "s3-lifecycle",
    description="Every bucket's lifecycle aborts incomplete multipart uploads and, when versioned, expires "
    "noncurrent versions (both otherwise accumulate storage charges forever).",
    severity=LOW,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lifecycle-mgmt.html",
    unknowns="Unknown rule lists or days are violations (they are literals).",
)
def s3_lifecycle(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    for bucket in stack.of_type(*BUCKET_TYPES):
        configs = settings_of(bucket, stack, LIFECYCLE_TYPES)
        rules = [r for c in configs for r in as_list(c.get("rules")) if dig(r, "status") == "Enabled"]
        missing = []
        if not any(number(dig(r, "abortIncompleteMultipartUpload", "daysAfterInitiation")) for r in rules):
            missing.append("abort incomplete multipart uploads")
        if _versioned(bucket, stack) == "Enabled" and not any(
            isinstance(number(dig(r, "noncurrentVersionExpiration", "noncurrentDays")), float) for r in rules
        ):
            missing.append("expire noncurrent versions")
        if missing:
            yield violation(
                f"bucket {bucket.name!r} has no enabled lifecycle rule to {' or '.join(missing)}",
                "add a BucketLifecycleConfiguration rule with abort_incomplete_multipart_upload and "
                "noncurrent_version_expiration",
                bucket.urn,
            )


@stack_rule(
    "s3-object-lock",
    description="Buckets that hold audit records (CloudTrail's, and any named in the config) use S3 Object "
    "Lock with a default retention.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html",
    unknowns="An unknown trail bucket is matched by property dependency; an unknown lock setting is a "
    "violation.",
    config={
        "bucketPatterns": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "More bucket names (shell patterns) that must use Object Lock.",
        }
    },
)
def s3_object_lock(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    buckets = stack.of_type(*BUCKET_TYPES)
    required: dict[str, str] = {}
    for trail in stack.of_type(TRAIL):
        for b in linked(trail, "s3BucketName", buckets, name_key="bucket"):
            required[b.urn] = f"CloudTrail trail {trail.name!r} writes to it"
    for b in buckets:
        name = b.get("bucket")
        if isinstance(name, str) and any(fnmatch.fnmatchcase(name, p) for p in ctx.config["bucketPatterns"]):
            required.setdefault(b.urn, "its name matches s3-object-lock bucketPatterns")
    for b in buckets:
        if b.urn not in required:
            continue
        locks = settings_of(b, stack, OBJECT_LOCK_TYPES)
        retention = dig(locks[0].props, "rule", "defaultRetention") if locks else None
        if truthy(b.get("objectLockEnabled")) is not True or not isinstance(retention, dict):
            yield violation(
                f"bucket {b.name!r} must be immutable ({required[b.urn]}) but has no Object Lock with a "
                "default retention",
                "create the bucket with object_lock_enabled: true and add a BucketObjectLockConfiguration "
                "with a default retention (COMPLIANCE or GOVERNANCE mode)",
                b.urn,
            )
