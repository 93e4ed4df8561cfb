"""Buckets in the train stacks' plans: SSE-KMS under the data key, versioning, public access blocked,
TLS only, lifecycle rules from the config, access logging into an SSE-S3 log bucket."""

from __future__ import annotations

import json

import pytest

from infra.plan.mocks import ACCOUNT_ID
from infra.plan.runner import Plan

TRAIN = ["dev-us-train", "prod-us-train"]
PURPOSES = ["datasets", "checkpoints", "artifacts"]


def _by_bucket(plan: Plan, type_: str, region: str | None = None) -> dict[str, dict]:
    """Companion resources of a type, keyed by the bucket (name) they configure, in one region."""
    return {
        r.inputs["bucket"]: r.inputs
        for r in plan.by_type(type_)
        if r.inputs.get("region") == region and "bucket" in r.inputs
    }


def _names(plan: Plan) -> dict[str, str]:
    env, region = plan.config["environment"], plan.region
    overrides = plan.config["storage"]["bucket_names"]
    return {p: overrides.get(p, f"aiplat-{env}-{region}-{p}") for p in [*PURPOSES, "access-logs"]}


@pytest.mark.parametrize("stack", TRAIN)
def test_buckets_and_their_companions(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    component = plan.one("aiplat:buckets:Buckets", "storage")
    names = _names(plan)
    buckets = {
        r.inputs["bucket"]: r for r in plan.children(component.urn) if r.type == "aws:s3/bucket:Bucket"
    }
    assert sorted(buckets) == sorted(names.values())
    assert plan.outputs["buckets"] == {p: names[p] for p in PURPOSES}

    data_key = plan.outputs["kmsKeyArns"]["data"]
    sse = _by_bucket(
        plan, "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
    )
    versioning = _by_bucket(plan, "aws:s3/bucketVersioning:BucketVersioning")
    blocks = _by_bucket(plan, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
    ownership = _by_bucket(plan, "aws:s3/bucketOwnershipControls:BucketOwnershipControls")
    policies = _by_bucket(plan, "aws:s3/bucketPolicy:BucketPolicy")
    for name in names.values():
        assert versioning[name]["versioningConfiguration"] == {"status": "Enabled"}
        assert {k: v for k, v in blocks[name].items() if k != "bucket"} == {
            "blockPublicAcls": True,
            "blockPublicPolicy": True,
            "ignorePublicAcls": True,
            "restrictPublicBuckets": True,
        }
        assert ownership[name]["rule"] == {"objectOwnership": "BucketOwnerEnforced"}
        deny = json.loads(policies[name]["policy"])["Statement"][0]
        assert deny["Effect"] == "Deny" and deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        assert deny["Resource"] == [f"arn:aws:s3:::{name}", f"arn:aws:s3:::{name}/*"]
    for p in PURPOSES:
        (rule,) = sse[names[p]]["rules"]
        assert rule == {
            "applyServerSideEncryptionByDefault": {"sseAlgorithm": "aws:kms", "kmsMasterKeyId": data_key},
            "bucketKeyEnabled": True,
            "blockedEncryptionTypes": ["SSE-C"],
        }
    # server access logs can only go to an SSE-S3 bucket
    (log_rule,) = sse[names["access-logs"]]["rules"]
    assert log_rule["applyServerSideEncryptionByDefault"] == {"sseAlgorithm": "AES256"}


@pytest.mark.parametrize("stack", TRAIN)
def test_lifecycle_follows_config(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    life = plan.config["storage"]["lifecycle"]
    names = _names(plan)
    rules = {
        b: {r["id"]: r for r in inputs["rules"]}
        for b, inputs in _by_bucket(
            plan, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
        ).items()
    }
    assert set(names.values()) <= set(rules)
    for name in names.values():
        abort = rules[name]["abort-incomplete-multipart-uploads"]
        assert abort["abortIncompleteMultipartUpload"] == {
            "daysAfterInitiation": life["abort_incomplete_multipart_days"]
        }
    checkpoints = rules[names["checkpoints"]]["noncurrent-versions"]
    assert checkpoints["noncurrentVersionTransitions"] == [
        {"noncurrentDays": life["checkpoint_noncurrent_ia_days"], "storageClass": "STANDARD_IA"}
    ]
    assert checkpoints["noncurrentVersionExpiration"] == {
        "noncurrentDays": life["checkpoint_noncurrent_expire_days"]
    }
    for p in ("datasets", "artifacts"):
        rule = rules[names[p]]["noncurrent-versions"]
        assert rule["noncurrentVersionExpiration"] == {"noncurrentDays": life["noncurrent_expire_days"]}
        assert "noncurrentVersionTransitions" not in rule
    assert rules[names["access-logs"]]["expire-objects"]["expiration"] == {
        "days": life["access_log_expire_days"]
    }
    # old versions of access logs stay as long as the logs (not one day)
    assert rules[names["access-logs"]]["noncurrent-versions"]["noncurrentVersionExpiration"] == {
        "noncurrentDays": life["access_log_expire_days"]
    }


@pytest.mark.parametrize("stack", TRAIN)
def test_access_logging(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    names = _names(plan)
    logging = _by_bucket(plan, "aws:s3/bucketLogging:BucketLogging")
    trail_bucket = plan.outputs["auditBucket"]
    assert sorted(logging) == sorted([*(names[p] for p in PURPOSES), trail_bucket])
    for p in PURPOSES:
        assert logging[names[p]]["targetBucket"] == names["access-logs"]
        assert logging[names[p]]["targetPrefix"] == f"{names[p]}/"
    assert logging[trail_bucket]["targetBucket"] == names["access-logs"]
    grant = json.loads(_by_bucket(plan, "aws:s3/bucketPolicy:BucketPolicy")[names["access-logs"]]["policy"])[
        "Statement"
    ][-1]
    assert grant["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    assert grant["Condition"]["ArnLike"]["aws:SourceArn"] == [
        *(f"arn:aws:s3:::{names[p]}" for p in PURPOSES),
        f"arn:aws:s3:::{trail_bucket}",
    ]
    assert grant["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT_ID


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_infer_stacks_own_no_buckets_in_their_region(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    assert plan.by_type("aws:s3/bucket:Bucket") == []
    assert plan.by_type("aiplat:buckets:Buckets") == []
