"""Check a deployed stack's buckets through the S3 and KMS APIs: they exist, are SSE-KMS with Bucket Keys
under exactly the key the program gave them, versioned, block all public access, refuse plain HTTP on the
whole bucket (bucket and objects), and -- for the trail bucket -- have Object Lock on.

Covers the train stack's own buckets, the replica buckets it owns in the inference regions (artifacts and
their access logs) and its CloudTrail bucket. The key a bucket must use is found by its alias
(``alias/<stack prefix>-data``, ``alias/<...>-data-replica`` in each inference region).

For after ``pulumi up`` (``aiplat check-storage --stack ...``); boto3 finds credentials and the endpoint the
usual way (``AWS_PROFILE``, ``AWS_ENDPOINT_URL``...). Tests run it against a moto server over HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from infra.core import naming
from infra.core.config import Role
from infra.io.aws_live import Clients
from infra.schema.platform import PlatformConfig
from infra.storage.config.security import TrailMode
from infra.storage.config.storage import BucketPurpose, StorageBackend


@dataclass(frozen=True)
class Finding:
    """One check of one bucket: ``ok`` or what is wrong."""

    bucket: str
    check: str
    ok: bool
    detail: str = ""


@dataclass(frozen=True)
class ExpectedBucket:
    """A bucket the program creates: where, what for, and the alias of the key it must be encrypted with
    (None: SSE-S3, the access-log buckets)."""

    name: str
    region: str
    purpose: str
    key_alias: str | None
    object_lock: bool = False
    bucket_key: bool = True


def expected_buckets(cfg: PlatformConfig) -> dict[str, BucketPurpose]:
    """bucket name -> purpose, as the program names this stack's own buckets (train stacks on S3 only)."""
    if cfg.role != Role.train or cfg.storage.backend != StorageBackend.s3:
        return {}
    return {cfg.bucket_name(p): p for p in BucketPurpose}


def all_expected(cfg: PlatformConfig) -> list[ExpectedBucket]:
    """Every bucket of the stack: its own, its replicas in the inference regions, its trail bucket."""
    names = cfg.names
    out: list[ExpectedBucket] = []
    data_alias = naming.kms_alias(names.stack_prefix, "data")
    for name, purpose in sorted(expected_buckets(cfg).items()):
        alias = None if purpose is BucketPurpose.access_logs else data_alias
        out.append(ExpectedBucket(name, cfg.region, purpose.value, alias))
    if expected_buckets(cfg):
        replica_alias = naming.kms_alias(names.global_prefix, "data-replica")
        for region in sorted(cfg.storage.replicate_to):
            art = names.bucket("artifacts", region)
            logs = names.bucket("access-logs", region)
            out.append(ExpectedBucket(art, region, "replica artifacts", replica_alias))
            out.append(ExpectedBucket(logs, region, "replica access-logs", None))
    if cfg.security.audit.trail is TrailMode.create:
        trail = names.bucket("cloudtrail")
        # the logs key, without Bucket Keys (CloudTrail's own encryption context stays on every object)
        logs_alias = naming.kms_alias(names.stack_prefix, "logs")
        out.append(
            ExpectedBucket(trail, cfg.region, "cloudtrail", logs_alias, object_lock=True, bucket_key=False)
        )
    return out


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def _key_arn(kms: Any, alias: str) -> str | None:
    try:
        return str(kms.describe_key(KeyId=alias)["KeyMetadata"]["Arn"])
    except ClientError:
        return None


def _same_key(configured: str, arn: str) -> bool:
    """A bucket's KMSMasterKeyID may hold the key's ARN or its id."""
    return configured == arn or (bool(configured) and arn.endswith(f":key/{configured}"))


def _denies_plain_http_everywhere(st: dict[str, Any], bucket: str) -> bool:
    """A Deny of every S3 action to everyone without TLS, on the bucket and all its objects (a deny on
    ``bucket/*`` alone would leave ListBucket and the bucket's settings reachable over HTTP)."""
    actions = _as_list(st.get("Action"))
    resources = [r for r in _as_list(st.get("Resource")) if isinstance(r, str) and r.startswith("arn:")]
    suffixes = {r.split(":::", 1)[-1] for r in resources}
    return (
        st.get("Effect") == "Deny"
        and st.get("Principal") in ("*", {"AWS": "*"})
        and ("s3:*" in actions or "*" in actions)
        and st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") in ("false", False)
        and {bucket, f"{bucket}/*"} <= suffixes
    )


def check_bucket(s3: Any, kms: Any, want: ExpectedBucket) -> list[Finding]:
    """Every check of one bucket; stops after 'exists' when it does not."""
    bucket = want.name
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        return [Finding(bucket, "exists", False, f"HeadBucket: {_code(exc)}")]
    found = [Finding(bucket, "exists", True)]

    try:
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
        default = rules[0].get("ApplyServerSideEncryptionByDefault", {})
        algorithm = default.get("SSEAlgorithm", "")
        if want.key_alias is None:
            ok, want_text = algorithm == "AES256", "AES256 (SSE-S3 by design)"
            found.append(
                Finding(bucket, "encryption", ok, "" if ok else f"{algorithm or 'none'}, want {want_text}")
            )
        else:
            keyed = bool(rules[0].get("BucketKeyEnabled"))
            ok = algorithm == "aws:kms" and keyed == want.bucket_key
            bucket_key = "with" if want.bucket_key else "without"
            found.append(
                Finding(
                    bucket,
                    "encryption",
                    ok,
                    "" if ok else f"{algorithm or 'none'}, want aws:kms {bucket_key} BucketKeyEnabled",
                )
            )
            arn = _key_arn(kms, want.key_alias)
            configured = str(default.get("KMSMasterKeyID") or "")
            same = arn is not None and _same_key(configured, arn)
            detail = (
                f"no key {want.key_alias} in {want.region}"
                if arn is None
                else ""
                if same
                else f"{configured or 'no key'}, want {arn} ({want.key_alias})"
            )
            found.append(Finding(bucket, "key", same, detail))
    except ClientError as exc:
        found.append(Finding(bucket, "encryption", False, _code(exc)))

    status = s3.get_bucket_versioning(Bucket=bucket).get("Status", "never enabled")
    found.append(Finding(bucket, "versioning", status == "Enabled", "" if status == "Enabled" else status))

    try:
        block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
        off = sorted(k for k, v in block.items() if not v)
        found.append(Finding(bucket, "public access block", not off, ", ".join(f"{k} off" for k in off)))
    except ClientError as exc:
        found.append(Finding(bucket, "public access block", False, _code(exc)))

    try:
        policy = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])
        tls = any(_denies_plain_http_everywhere(st, bucket) for st in _as_list(policy.get("Statement")))
        found.append(
            Finding(
                bucket,
                "TLS only",
                tls,
                "" if tls else "no Deny of s3:* without TLS on the bucket and bucket/*",
            )
        )
    except ClientError as exc:
        found.append(Finding(bucket, "TLS only", False, f"no bucket policy ({_code(exc)})"))

    if want.object_lock:
        try:
            lock = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
            on = lock.get("ObjectLockEnabled") == "Enabled"
            found.append(Finding(bucket, "object lock", on, "" if on else "not enabled"))
        except ClientError as exc:
            found.append(Finding(bucket, "object lock", False, _code(exc)))
    return found


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value] if value is not None else []


def check_storage(cfg: PlatformConfig, clients: Clients) -> list[Finding]:
    """Every finding for the stack's buckets (own, replicas, trail), each checked in its region."""
    return [
        f
        for want in all_expected(cfg)
        for f in check_bucket(clients("s3", want.region), clients("kms", want.region), want)
    ]
