"""``aiplat check-storage`` against a local moto S3 server over HTTP (real boto3 requests and responses)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from infra.cli.main import main
from infra.core import iam
from infra.io.stackfiles import load_stack_config
from infra.ops.storage_check import ExpectedBucket, all_expected, check_storage
from infra.storage import documents as storage_documents
from trainer.tools.moto_server import MotoServer


@pytest.fixture
def s3_server(monkeypatch) -> Iterator[str]:
    server = MotoServer().start()  # returns once the server answers
    endpoint = server.endpoint
    monkeypatch.setenv("AWS_ENDPOINT_URL", endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    server.reset()  # moto keeps its state per process: start every test from an empty account
    try:
        yield endpoint
    finally:
        server.stop()


def _key(region: str, alias: str) -> str:
    """A KMS key behind ``alias`` in ``region`` (on the moto server); its ARN."""
    kms = boto3.client("kms", region_name=region)
    arn = kms.create_key(Description=alias)["KeyMetadata"]["Arn"]
    kms.create_alias(AliasName=alias, TargetKeyId=arn)
    return arn


def _make(
    want: ExpectedBucket,
    *,
    key_arn: str | None,
    versioned: bool = True,
    blocked: bool = True,
    tls: str = "whole",
    lock: bool | None = None,
) -> None:
    """Create one bucket the way the program configures it; the keyword arguments break one thing."""
    s3 = boto3.client("s3", region_name=want.region)
    lock = want.object_lock if lock is None else lock
    where = (
        {}
        if want.region == "us-east-1"
        else {"CreateBucketConfiguration": {"LocationConstraint": want.region}}
    )
    s3.create_bucket(Bucket=want.name, ObjectLockEnabledForBucket=lock, **where)
    default = (
        {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": key_arn} if key_arn else {"SSEAlgorithm": "AES256"}
    )
    s3.put_bucket_encryption(
        Bucket=want.name,
        ServerSideEncryptionConfiguration={
            "Rules": [
                {
                    "ApplyServerSideEncryptionByDefault": default,
                    "BucketKeyEnabled": bool(key_arn) and want.bucket_key,
                }
            ]
        },
    )
    if versioned:
        s3.put_bucket_versioning(Bucket=want.name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(
        Bucket=want.name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": blocked,
            "RestrictPublicBuckets": True,
        },
    )
    arn = f"arn:aws:s3:::{want.name}"
    if tls == "whole":
        s3.put_bucket_policy(
            Bucket=want.name, Policy=json.dumps(storage_documents.bucket_policy(arn, kms_key_arn=key_arn))
        )
    elif tls == "objects-only":  # the deny misses the bucket itself (ListBucket over HTTP)
        deny = storage_documents.deny_insecure_transport(arn) | {"Resource": [f"{arn}/*"]}
        s3.put_bucket_policy(Bucket=want.name, Policy=json.dumps(iam.policy(deny)))


def _deploy(stack: str, **broken: dict) -> dict[str, ExpectedBucket]:
    """Create every bucket of ``stack`` as the program configures it (keys by their aliases);
    ``broken`` maps a bucket purpose (spaces and dashes as '_') to overrides of ``_make``.
    Returns the buckets by name."""
    wanted = all_expected(load_stack_config(stack))
    keys: dict[tuple[str, str], str] = {}
    for want in wanted:
        key = None
        if want.key_alias:
            if (want.region, want.key_alias) not in keys:
                keys[(want.region, want.key_alias)] = _key(want.region, want.key_alias)
            key = keys[(want.region, want.key_alias)]
        _make(want, **{"key_arn": key, **broken.get(want.purpose.replace(" ", "_").replace("-", "_"), {})})
    return {w.name: w for w in wanted}


def test_deployed_as_planned_passes(s3_server, capsys) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    assert s3.meta.endpoint_url == s3_server  # the real client, pointed at the local server
    wanted = _deploy("dev-us-train")
    assert {w.purpose for w in wanted.values()} == {
        "datasets",
        "checkpoints",
        "artifacts",
        "access-logs",
        "cloudtrail",
    }
    assert main(["check-storage", "--stack", "dev-us-train"]) == 0
    out = capsys.readouterr().out
    # 3 data buckets x 6 checks, access logs 5, the trail bucket 7 (its key, no Bucket Keys, Object Lock)
    assert "30 ok, 0 failed" in out


def test_drift_is_reported(s3_server, capsys) -> None:
    other = _key("us-west-2", "alias/someone-elses")
    wanted = _deploy(
        "dev-us-train",
        datasets={"key_arn": other},
        checkpoints={"versioned": False},
        artifacts={"blocked": False, "tls": "objects-only"},
        cloudtrail={"lock": False},
    )
    assert main(["check-storage", "--stack", "dev-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "25 ok, 5 failed" in out
    # the exact key: the datasets bucket is under a key of the account, but not the stack's data key
    cfg = load_stack_config("dev-us-train")
    findings = check_storage(cfg, lambda service, region: boto3.client(service, region_name=region))
    datasets = next(n for n, w in wanted.items() if w.purpose == "datasets")
    (key,) = [f for f in findings if f.bucket == datasets and f.check == "key"]
    assert not key.ok and key.detail.startswith(f"{other}, want arn:aws:kms:us-west-2:")
    assert key.detail.endswith("(alias/aiplat-dev-train-data)")
    assert "FAIL never enabled" in out
    assert "FAIL BlockPublicPolicy off" in out
    assert "FAIL no Deny of s3:* without TLS on the bucket and bucket/*" in out
    assert next(n for n, w in wanted.items() if w.purpose == "datasets") in out


def test_replicas_are_checked_in_their_regions(s3_server, capsys) -> None:
    wanted = _deploy("prod-us-train", replica_artifacts={"tls": "none"})
    replicas = [w for w in wanted.values() if w.purpose.startswith("replica")]
    assert {w.region for w in replicas} == {"ap-east-1", "ap-southeast-1"}
    assert main(["check-storage", "--stack", "prod-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    # 4 own + trail bucket in us-east-1, artifacts and access logs in each inference region
    assert len(wanted) == 9
    # the replica artifacts buckets (one per region) lack their policy; everything else, replica keys
    # found by alias in each region included, passes
    assert out.count("FAIL no bucket policy") == 2 and out.count("FAIL") == 2
    assert "50 ok, 2 failed" in out


def test_missing_buckets(s3_server, capsys) -> None:
    assert main(["check-storage", "--stack", "prod-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "0 ok, 9 failed" in out and "FAIL HeadBucket: 404" in out


def test_infer_stack_has_no_buckets_to_check(s3_server, capsys) -> None:
    assert main(["check-storage", "--stack", "prod-sg-infer"]) == 0
    assert "0 ok, 0 failed" in capsys.readouterr().out
