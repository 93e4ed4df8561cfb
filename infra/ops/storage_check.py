"""Check a deployed stack's buckets through the S3 API: they exist, are SSE-KMS with Bucket Keys,
versioned, block all public access and refuse plain HTTP.

For after ``pulumi up`` (``aiplat check-storage --stack ...``); boto3 finds credentials and the endpoint the
usual way (``AWS_PROFILE``, ``AWS_ENDPOINT_URL``...). Tests run it against a moto server over HTTP.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from infra.model.config.schema import BucketPurpose, PlatformConfig, Role, StorageBackend


@dataclass(frozen=True)
class Finding:
    """One check of one bucket: ``ok`` or what is wrong."""

    bucket: str
    check: str
    ok: bool
    detail: str = ""


def expected_buckets(cfg: PlatformConfig) -> dict[str, BucketPurpose]:
    """bucket name -> purpose, as the program names them for this stack (train stacks on S3 only)."""
    if cfg.role != Role.train or cfg.storage.backend != StorageBackend.s3:
        return {}
    env = cfg.environment.value
    return {cfg.storage.bucket_name(p, cfg.name_prefix, env, cfg.region): p for p in BucketPurpose}


def _code(exc: ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))


def check_bucket(s3: Any, bucket: str, purpose: BucketPurpose) -> list[Finding]:
    """Every check of one bucket; stops after 'exists' when it does not."""
    try:
        s3.head_bucket(Bucket=bucket)
    except ClientError as exc:
        return [Finding(bucket, "exists", False, f"HeadBucket: {_code(exc)}")]
    found = [Finding(bucket, "exists", True)]

    try:
        rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
        default = rules[0].get("ApplyServerSideEncryptionByDefault", {})
        algorithm = default.get("SSEAlgorithm", "")
        if purpose == BucketPurpose.access_logs:
            ok, want = algorithm == "AES256", "AES256 (access-log targets take SSE-S3 only)"
        else:
            ok = (
                algorithm == "aws:kms"
                and bool(default.get("KMSMasterKeyID"))
                and bool(rules[0].get("BucketKeyEnabled"))
            )
            want = "aws:kms with a key and BucketKeyEnabled"
        found.append(Finding(bucket, "encryption", ok, "" if ok else f"{algorithm or 'none'}, want {want}"))
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
        tls = any(
            st.get("Effect") == "Deny"
            and st.get("Condition", {}).get("Bool", {}).get("aws:SecureTransport") in ("false", False)
            for st in policy.get("Statement", [])
        )
        found.append(Finding(bucket, "TLS only", tls, "" if tls else "no Deny on aws:SecureTransport=false"))
    except ClientError as exc:
        found.append(Finding(bucket, "TLS only", False, f"no bucket policy ({_code(exc)})"))
    return found


def check_storage(cfg: PlatformConfig, s3: Any) -> list[Finding]:
    """Every finding for the stack's buckets, in name order."""
    return [
        f for name, purpose in sorted(expected_buckets(cfg).items()) for f in check_bucket(s3, name, purpose)
    ]
