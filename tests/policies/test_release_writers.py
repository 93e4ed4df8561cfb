"""s3-release-writers-only-publisher: release/ of the buckets holding model releases is written only by the
publisher (and break-glass), create-only (a compliant and violating cases)."""

from __future__ import annotations

import json
from typing import Any

from infra.core.naming import StackNames
from infra.storage.documents import ReleaseGuard, bucket_policy
from tests.policies.conftest import R

RULE = "s3-release-writers-only-publisher"
NAMES = StackNames("aiplat", "prod", "train", "us-east-1")
BUCKET = "aiplat-prod-use1-artifacts"


def _arn(name: str) -> str:
    return f"arn:aws:iam::123456789012:role/{name}"


PUBLISHER, GLASS = _arn(NAMES.role_name("publisher")), _arn(NAMES.role_name("break-glass"))


def _bucket(doc: dict[str, Any], name: str = "storage-artifacts") -> list[R]:
    bucket = R("aws:s3/bucket:Bucket", name, {"bucket": BUCKET})
    policy = R(
        "aws:s3/bucketPolicy:BucketPolicy",
        f"{name}-policy",
        {"bucket": BUCKET, "policy": json.dumps(doc)},
        deps={"bucket": [name]},
    )
    return [bucket, policy]


def _program(writers: tuple[str, ...] = (PUBLISHER, GLASS)) -> dict[str, Any]:
    """The program's own artifacts bucket policy (infra/storage/documents.py)."""
    guard = ReleaseGuard(prefix="release", writers=writers, admins=(GLASS, _arn("aiplat-deploy")))
    return bucket_policy(f"arn:aws:s3:::{BUCKET}", release_guard=guard)


def test_the_programs_artifacts_policy_passes(check) -> None:
    check(RULE, _bucket(_program()), None)
    # a replica: break-glass only (S3 replication writes with s3:ReplicateObject)
    check(RULE, _bucket(_program((GLASS,)), "replication-ap-east-1-artifacts"), None)
    # other buckets are not release buckets
    check(RULE, _bucket(bucket_policy(f"arn:aws:s3:::{BUCKET}"), "storage-datasets"), None)


def test_a_bucket_without_the_guard_is_a_violation(check) -> None:
    doc = bucket_policy(f"arn:aws:s3:::{BUCKET}")  # TLS and encryption denials only
    check(RULE, _bucket(doc), "lets any role with s3:PutObject on it write release/")
    check(RULE, _bucket(doc), "lets a publisher overwrite a release (no If-None-Match required)")


def test_another_writer_is_a_violation(check) -> None:
    trainer = _arn("pod-roles-trainer")
    check(RULE, _bucket(_program((PUBLISHER, GLASS, trainer))), "lets ['pod-roles-trainer'] s3:PutObject")


def test_a_narrowed_or_missing_statement_does_not_count(check) -> None:
    doc = _program()
    for s in doc["Statement"]:
        if s.get("Sid") == "OnlyPublisherWritesReleases":
            s["Condition"]["Bool"] = {"aws:MultiFactorAuthPresent": "false"}  # denies only some requests
    check(RULE, _bucket(doc), "lets any role with s3:DeleteObject on it write release/")
    doc = _program()
    doc["Statement"] = [s for s in doc["Statement"] if s.get("Sid") != "ReleaseWritesCreateOnly"]
    check(RULE, _bucket(doc), "no If-None-Match required")
