"""``aiplat check-storage`` against a local moto S3 server over HTTP (real boto3 requests and responses)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import boto3
import pytest

from infra.cli.main import main
from infra.io.stackfiles import load_stack_config
from infra.lib import iam
from infra.ops.storage_check import expected_buckets
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


def _make(
    s3, name: str, *, kms: bool, versioned: bool = True, blocked: bool = True, tls: bool = True
) -> None:
    s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
    default = (
        {"SSEAlgorithm": "aws:kms", "KMSMasterKeyID": "arn:aws:kms:us-west-2:123456789012:key/k"}
        if kms
        else {"SSEAlgorithm": "AES256"}
    )
    s3.put_bucket_encryption(
        Bucket=name,
        ServerSideEncryptionConfiguration={
            "Rules": [{"ApplyServerSideEncryptionByDefault": default, "BucketKeyEnabled": kms}]
        },
    )
    if versioned:
        s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
    s3.put_public_access_block(
        Bucket=name,
        PublicAccessBlockConfiguration={
            "BlockPublicAcls": True,
            "IgnorePublicAcls": True,
            "BlockPublicPolicy": blocked,
            "RestrictPublicBuckets": True,
        },
    )
    if tls:
        s3.put_bucket_policy(Bucket=name, Policy=json.dumps(iam.bucket_policy(f"arn:aws:s3:::{name}")))


def _deploy_dev(s3, **broken: dict) -> dict[str, str]:
    """Create dev-us-train's buckets as the program configures them; ``broken`` per purpose overrides."""
    names = {p.value: n for n, p in expected_buckets(load_stack_config("dev-us-train")).items()}
    for purpose, name in names.items():
        settings = {"kms": purpose != "access-logs", **broken.get(purpose.replace("-", "_"), {})}
        _make(s3, name, **settings)
    return names


def test_deployed_as_planned_passes(s3_server, capsys) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    assert s3.meta.endpoint_url == s3_server  # the real client, pointed at the local server
    _deploy_dev(s3)
    assert main(["check-storage", "--stack", "dev-us-train"]) == 0
    out = capsys.readouterr().out
    assert "20 ok, 0 failed" in out


def test_drift_is_reported(s3_server, capsys) -> None:
    s3 = boto3.client("s3", region_name="us-west-2")
    names = _deploy_dev(
        s3,
        datasets={"kms": False},
        checkpoints={"versioned": False},
        artifacts={"blocked": False, "tls": False},
    )
    assert main(["check-storage", "--stack", "dev-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "16 ok, 4 failed" in out
    assert "FAIL AES256, want aws:kms with a key and BucketKeyEnabled" in out
    assert "FAIL never enabled" in out
    assert "FAIL BlockPublicPolicy off" in out
    assert "FAIL no bucket policy" in out
    assert names["datasets"] in out


def test_missing_buckets(s3_server, capsys) -> None:
    assert main(["check-storage", "--stack", "prod-us-train"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "0 ok, 4 failed" in out and "FAIL HeadBucket: 404" in out


def test_infer_stack_has_no_buckets_to_check(s3_server, capsys) -> None:
    assert main(["check-storage", "--stack", "prod-sg-infer"]) == 0
    assert "0 ok, 0 failed" in capsys.readouterr().out
