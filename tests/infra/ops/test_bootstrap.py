"""`aiplat bootstrap` against a local AWS (moto_server over HTTP, boto3 pointed at it with AWS_ENDPOINT_URL):
check reports what is missing and creates nothing; create makes the state bucket, the secrets key and the
deployer role with its policies; a second check finds them all; a changed policy gets a new default
version."""

from __future__ import annotations

import json

import boto3
import pytest

from infra.core.errors import ConfigError
from infra.io.aws_live import boto3_clients
from infra.ops.bootstrap import (
    ensure_deployer,
    ensure_secrets_key,
    ensure_state_bucket,
    secrets_key,
    state_backend,
)
from trainer.tools.moto_server import MotoServer

BACKEND = state_backend("s3://aiplat-pulumi-state/aiplat?region=eu-central-1")
KEY = secrets_key("awskms://alias/aiplat-pulumi?region=eu-central-1")
TRUST = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": "sts:AssumeRole",
        }
    ],
}


def _doc(action: str) -> dict:
    return {
        "Version": "2012-10-17",
        "Statement": [{"Sid": "A", "Effect": "Allow", "Action": [action], "Resource": "*"}],
    }


POLICIES = [
    ("aiplat-dev-train-use1-deployer-1", _doc("eks:DescribeCluster")),
    ("aiplat-dev-train-use1-deployer-2", _doc("s3:ListAllMyBuckets")),
]


def _run(create: bool, policies=POLICIES) -> list:
    clients = boto3_clients()
    steps, key_arn = ensure_secrets_key(clients, KEY, create=create)
    steps += ensure_state_bucket(clients, BACKEND, key_arn, create=create)
    steps += ensure_deployer(
        clients, role="aiplat-deploy", trust=TRUST, policies=policies, partition="aws", create=create
    )
    return steps


def test_check_creates_nothing_and_names_what_is_missing(aws: MotoServer) -> None:
    steps = _run(create=False)
    missing = {s.what for s in steps if s.status == "missing"}
    assert "secrets key alias/aiplat-pulumi (eu-central-1)" in missing
    assert "state bucket aiplat-pulumi-state" in missing
    assert "deployer role aiplat-deploy" in missing
    assert {f"policy {n}" for n, _ in POLICIES} <= missing
    s3 = aws.client("s3", "eu-central-1")
    assert s3.list_buckets()["Buckets"] == []
    assert aws.client("iam").list_roles()["Roles"] == []


def test_create_then_check_finds_everything(aws: MotoServer) -> None:
    created = _run(create=True)
    assert {s.status for s in created} <= {"created", "updated", "ok"}
    # what AWS now holds, read back with plain boto3 clients
    s3 = boto3.client("s3", region_name="eu-central-1")
    assert s3.get_bucket_location(Bucket=BACKEND.bucket)["LocationConstraint"] == "eu-central-1"
    assert s3.get_bucket_versioning(Bucket=BACKEND.bucket)["Status"] == "Enabled"
    (rule,) = s3.get_bucket_encryption(Bucket=BACKEND.bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    kms = boto3.client("kms", region_name="eu-central-1")
    key = kms.describe_key(KeyId=KEY.alias)["KeyMetadata"]
    assert rule["ApplyServerSideEncryptionByDefault"] == {
        "SSEAlgorithm": "aws:kms",
        "KMSMasterKeyID": key["Arn"],
    }
    assert kms.get_key_rotation_status(KeyId=key["KeyId"])["KeyRotationEnabled"]
    block = s3.get_public_access_block(Bucket=BACKEND.bucket)["PublicAccessBlockConfiguration"]
    assert all(block.values()) and len(block) == 4
    iam = boto3.client("iam")
    role = iam.get_role(RoleName="aiplat-deploy")["Role"]
    assert role["AssumeRolePolicyDocument"] == TRUST
    attached = {
        p["PolicyName"] for p in iam.list_attached_role_policies(RoleName="aiplat-deploy")["AttachedPolicies"]
    }
    assert attached == {n for n, _ in POLICIES}

    checked = _run(create=False)
    assert [s for s in checked if s.status != "ok"] == []
    count = next(s for s in checked if s.what == "deployer role aiplat-deploy managed policies")
    assert count.detail.startswith("2 attached")


def test_a_changed_policy_gets_a_new_default_version(aws: MotoServer) -> None:
    _run(create=True)
    changed = [(POLICIES[0][0], _doc("eks:ListClusters")), POLICIES[1]]
    assert [s.what for s in _run(create=False, policies=changed) if s.status == "missing"] == [
        f"policy {changed[0][0]}"
    ]
    steps = _run(create=True, policies=changed)
    assert next(s for s in steps if s.what == f"policy {changed[0][0]}").status == "updated"
    iam = boto3.client("iam")
    arn = f"arn:aws:iam::123456789012:policy/{changed[0][0]}"
    default = iam.get_policy(PolicyArn=arn)["Policy"]["DefaultVersionId"]
    document = iam.get_policy_version(PolicyArn=arn, VersionId=default)["PolicyVersion"]["Document"]
    assert (json.loads(document) if isinstance(document, str) else document) == changed[0][1]


def test_backend_urls_bootstrap_cannot_create_are_refused() -> None:
    with pytest.raises(ConfigError, match="rollout.yaml: backend_url"):
        state_backend("https://api.pulumi.com")
    with pytest.raises(ConfigError, match="rollout.yaml: secrets_provider"):
        secrets_key("passphrase")
