"""Encryption at rest with customer managed keys, and the KMS key rules: a compliant and a violating case
each."""

from __future__ import annotations

import json

import pytest

from tests.policies.conftest import KEY_ARN, UNKNOWN, R

BUCKET = "aws:s3/bucket:Bucket"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
LOGGING = "aws:s3/bucketLogging:BucketLogging"
LT = "aws:ec2/launchTemplate:LaunchTemplate"


def sse(bucket: str, algorithm: str = "aws:kms", key: str | None = KEY_ARN, deps: bool = True) -> R:
    default = {"sseAlgorithm": algorithm} | ({"kmsMasterKeyId": key} if key else {})
    return R(
        SSE,
        f"{bucket}-sse",
        {
            "bucket": bucket,
            "rules": [{"applyServerSideEncryptionByDefault": default, "bucketKeyEnabled": True}],
        },
        deps={"bucket": [bucket]} if deps else {},
    )


def bucket(name: str) -> R:
    return R(BUCKET, name, {"bucket": name})


def lt(ebs: dict | None, **extra) -> R:
    mappings = [{"deviceName": "/dev/xvda", "ebs": ebs}] if ebs is not None else []
    inputs = {"blockDeviceMappings": mappings} if mappings else {}
    return R(LT, "pool-lt", inputs | extra)


S3 = "s3-bucket-cmk-encryption"


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ([bucket("data"), sse("data")], None),
        # matched by name when the sub-resource names the bucket literally (no property dependency)
        ([bucket("data"), sse("data", deps=False)], None),
        ([bucket("data")], "bucket 'data' has no default encryption configuration"),
        ([bucket("data"), sse("data", "AES256", None)], "bucket 'data' uses ['AES256'] instead of SSE-KMS"),
        ([bucket("data"), sse("data", key="alias/aws/s3")], "uses SSE-KMS with the AWS managed key"),
        ([bucket("data"), sse("data", key=None)], "uses SSE-KMS with the AWS managed key"),
        # a key computed from a key resource of the same update is unknown at preview: customer managed
        ([bucket("data"), sse("data", key=UNKNOWN)], None),
        # server access log buckets must use SSE-S3
        (
            [
                bucket("data"),
                sse("data"),
                bucket("logs"),
                sse("logs", "AES256", None),
                R(
                    LOGGING,
                    "data-logging",
                    {"bucket": "data", "targetBucket": "logs"},
                    deps={"targetBucket": ["logs"]},
                ),
            ],
            None,
        ),
    ],
    ids=["kms", "by-name", "none", "aes256", "aws-managed", "no-key", "unknown-key", "log-target"],
)
def test_s3_bucket_cmk_encryption(check, resources, expected):
    check(S3, resources, expected)


EBS = "ebs-cmk-encryption"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (lt({"encrypted": "true", "kmsKeyId": KEY_ARN, "volumeType": "gp3"}), None),
        (lt({"encrypted": "true", "kmsKeyId": UNKNOWN}), None),
        (lt({"encrypted": "false", "kmsKeyId": KEY_ARN}), "blockDeviceMappings[0]: volume not encrypted"),
        (lt({"encrypted": "true"}), "blockDeviceMappings[0]: encrypted with the default EBS key"),
        (
            lt({"encrypted": UNKNOWN, "kmsKeyId": KEY_ARN}),
            "volume not encrypted (encrypted=<unknown at preview>)",
        ),
        (lt(None), "the launch template declares no block device mappings"),
        (R("aws:eks/nodeGroup:NodeGroup", "ng", {"instanceTypes": ["m6i.xlarge"]}), "no launch template"),
        (R("aws:ebs/volume:Volume", "vol", {"encrypted": True, "kmsKeyId": KEY_ARN}), None),
        (R("aws:ebs/volume:Volume", "vol", {"encrypted": False}), "volume: volume not encrypted"),
        (
            R(
                "kubernetes:storage.k8s.io/v1:StorageClass",
                "gp3",
                {
                    "provisioner": "ebs.csi.aws.com",
                    "parameters": {"type": "gp3", "encrypted": "true", "kmsKeyId": KEY_ARN},
                },
            ),
            None,
        ),
        (
            R(
                "kubernetes:storage.k8s.io/v1:StorageClass",
                "gp3",
                {"provisioner": "ebs.csi.aws.com", "parameters": {}},
            ),
            "parameters: volume not encrypted",
        ),
        (
            # parameters built in one apply over a value of this update: unknown as a whole at preview
            R(
                "kubernetes:storage.k8s.io/v1:StorageClass",
                "gp3",
                {"provisioner": "ebs.csi.aws.com", "parameters": UNKNOWN},
            ),
            "parameters: volume not encrypted (encrypted=<unknown at preview>)",
        ),
        (
            R(
                "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
                "gpu",
                {"spec": {"blockDeviceMappings": [{"ebs": {"encrypted": True, "kmsKeyID": KEY_ARN}}]}},
            ),
            None,
        ),
        (
            R("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass", "gpu", {"spec": {}}),
            "sets no blockDeviceMappings",
        ),
    ],
    ids=[
        "lt-cmk",
        "lt-unknown-key",
        "lt-unencrypted",
        "lt-default-key",
        "lt-unknown-flag",
        "lt-no-mappings",
        "nodegroup-no-lt",
        "volume-cmk",
        "volume-plain",
        "storageclass-cmk",
        "storageclass-plain",
        "storageclass-unknown-parameters",
        "nodeclass-cmk",
        "nodeclass-default",
    ],
)
def test_ebs_cmk_encryption(check, resource, expected):
    check(EBS, [resource], expected)


CLUSTER = "aws:eks/cluster:Cluster"


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"encryptionConfig": {"provider": {"keyArn": KEY_ARN}, "resources": ["secrets"]}}, None),
        ({"encryptionConfig": {"provider": {"keyArn": UNKNOWN}, "resources": ["secrets"]}}, None),
        ({}, "secrets are not envelope-encrypted"),
        (
            {"encryptionConfig": {"provider": {"keyArn": KEY_ARN}, "resources": UNKNOWN}},
            "not envelope-encrypted",
        ),
    ],
    ids=["cmk", "unknown-key", "none", "unknown-resources"],
)
def test_eks_secrets_encryption(check, inputs, expected):
    check("eks-secrets-encryption", [R(CLUSTER, "eks", inputs)], expected)


REPO = "aws:ecr/repository:Repository"
TEMPLATE = "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate"


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (R(REPO, "repo", {"encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": KEY_ARN}]}), None),
        (R(REPO, "repo", {"name": "x"}), "images are encrypted with AES256 (the default), not KMS"),
        (
            R(REPO, "repo", {"encryptionConfigurations": [{"encryptionType": "KMS"}]}),
            "AWS managed key aws/ecr",
        ),
        (
            R(TEMPLATE, "tpl", {"encryptionConfigurations": [{"encryptionType": "AES256"}]}),
            "encrypted with AES256",
        ),
    ],
    ids=["cmk", "default", "aws-managed", "template-aes"],
)
def test_ecr_cmk_encryption(check, resource, expected):
    check("ecr-cmk-encryption", [resource], expected)


LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"name": "/aws/eks/x/cluster", "kmsKeyId": KEY_ARN, "retentionInDays": 90}, None),
        (
            {"name": "/aws/eks/x/cluster", "retentionInDays": 90},
            "log group '/aws/eks/x/cluster' is not encrypted",
        ),
    ],
    ids=["cmk", "none"],
)
def test_log_group_cmk_encryption(check, inputs, expected):
    check("log-group-cmk-encryption", [R(LOG_GROUP, "lg", inputs)], expected)


LUSTRE = "aws:fsx/lustreFileSystem:LustreFileSystem"


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"deploymentType": "PERSISTENT_2", "kmsKeyId": KEY_ARN}, None),
        (
            {"deploymentType": "SCRATCH_2"},
            "Lustre deployment type SCRATCH_2 is encrypted with an FSx-managed key",
        ),
        ({}, "deployment type SCRATCH_1"),
        ({"deploymentType": "PERSISTENT_2"}, "no customer managed key"),
    ],
    ids=["persistent-cmk", "scratch", "default-scratch", "persistent-no-key"],
)
def test_fsx_cmk_encryption(check, inputs, expected):
    check("fsx-cmk-encryption", [R(LUSTRE, "fsx", inputs)], expected)


KEY = "aws:kms/key:Key"


def key_policy(*statements: dict) -> str:
    root = {
        "Sid": "Admin",
        "Effect": "Allow",
        "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
        "Action": "kms:*",
        "Resource": "*",
    }
    return json.dumps({"Version": "2012-10-17", "Statement": [root, *statements]})


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ({"enableKeyRotation": True, "rotationPeriodInDays": 365}, None),
        ({"enableKeyRotation": False}, "automatic rotation is off"),
        ({}, "automatic rotation is off (enable_key_rotation=None)"),
        (
            {"enableKeyRotation": True, "rotationPeriodInDays": 400},
            "rotation period 400.0 days is longer than a year",
        ),
        ({"customerMasterKeySpec": "RSA_2048", "keyUsage": "SIGN_VERIFY"}, None),  # AWS does not rotate these
    ],
    ids=["on", "off", "unset", "too-long", "asymmetric"],
)
def test_kms_key_rotation(check, inputs, expected):
    check("kms-key-rotation", [R(KEY, "key", inputs)], expected)


@pytest.mark.parametrize(
    ("inputs", "config", "expected"),
    [
        ({"deletionWindowInDays": 30}, None, None),
        ({}, None, None),
        ({"deletionWindowInDays": 7}, None, "deletion window 7.0 days is shorter than 30"),
        ({"deletionWindowInDays": 7}, {"kms-key-deletion-window": {"minDays": 7}}, None),
    ],
    ids=["30", "default", "7", "7-allowed-by-config"],
)
def test_kms_key_deletion_window(check, inputs, config, expected):
    check("kms-key-deletion-window", [R(KEY, "key", inputs)], expected, pack_config=config)


WILD = {"Sid": "Everyone", "Effect": "Allow", "Principal": "*", "Action": "kms:Decrypt", "Resource": "*"}


@pytest.mark.parametrize(
    ("resource", "expected"),
    [
        (R(KEY, "key", {"policy": key_policy()}), None),
        (
            R(KEY, "key", {"policy": key_policy(WILD)}),
            "statement Everyone allows ['kms:Decrypt'] to any principal",
        ),
        (
            R(
                KEY,
                "key",
                {
                    "policy": key_policy(
                        WILD | {"Condition": {"StringEquals": {"kms:CallerAccount": "123456789012"}}}
                    )
                },
            ),
            None,
        ),
        (R(KEY, "key", {"policy": key_policy(WILD | {"Principal": {"AWS": ["*"]}})}), "to any principal"),
        (
            R(
                "aws:s3/bucketPolicy:BucketPolicy",
                "bp",
                {
                    "policy": json.dumps(
                        {
                            "Statement": [
                                {"Effect": "Deny", "Principal": "*", "Action": "s3:*", "Resource": "*"}
                            ]
                        }
                    )
                },
            ),
            None,
        ),
        (
            R(
                "aws:s3/bucketPolicy:BucketPolicy",
                "bp",
                {
                    "policy": json.dumps(
                        {
                            "Statement": [
                                {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "s3:GetObject"}
                            ]
                        }
                    )
                },
            ),
            "to any principal",
        ),
    ],
    ids=[
        "account",
        "wildcard",
        "wildcard-scoped",
        "wildcard-list",
        "bucket-deny",
        "bucket-public",
    ],
)
def test_no_wildcard_principal(check, resource, expected):
    check("no-wildcard-principal", [resource], expected)
