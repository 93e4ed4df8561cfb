"""Encryption at rest under customer managed KMS keys: S3, EBS, EKS secrets, ECR, CloudWatch Logs, FSx."""

from __future__ import annotations

from collections.abc import Iterator

from .aws import (
    BUCKET_TYPES,
    INSTANCE,
    LAUNCH_TEMPLATE,
    NODE_GROUP,
    bucket_of,
    key_is_customer_managed,
    linked,
)
from .core import (
    HIGH,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    dig,
    resource_rule,
    stack_rule,
    truthy,
    violation,
)
from .nodes import EC2_NODE_CLASS

SSE_TYPES = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "aws:s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
)
LOGGING_TYPES = ("aws:s3/bucketLogging:BucketLogging", "aws:s3/bucketLoggingV2:BucketLoggingV2")
KMS_ALGORITHMS = ("aws:kms", "aws:kms:dsse")


def log_target_buckets(stack: Stack) -> set[str]:
    """URNs of the buckets that receive S3 server access logs (S3 requires SSE-S3 on those)."""
    buckets = stack.of_type(*BUCKET_TYPES)
    targets: set[str] = set()
    for logging in stack.of_type(*LOGGING_TYPES):
        for b in linked(logging, "targetBucket", buckets, name_key="bucket"):
            targets.add(b.urn)
    return targets


def _sse_rules(bucket: Res, stack: Stack) -> list | None:
    """The default-encryption rules of a bucket: its SSE configuration resource, else inline (v6 style)."""
    buckets = stack.of_type(*BUCKET_TYPES)
    for sse in stack.of_type(*SSE_TYPES):
        if bucket_of(sse, buckets) is bucket:
            return as_list(sse.get("rules")) if sse.get("rules") is not UNKNOWN else [UNKNOWN]
    inline = bucket.get("serverSideEncryptionConfiguration", "rule")
    return as_list(inline) if inline is not None else None


@stack_rule(
    "s3-bucket-cmk-encryption",
    description="S3 buckets are encrypted by default with SSE-KMS under a customer managed key "
    "(server access log buckets: SSE-S3, the only default encryption S3 log delivery accepts).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AmazonS3/latest/userguide/UsingKMSEncryption.html",
    unknowns="An unknown key id counts as a customer managed key (it is computed from a key of this "
    "update; AWS managed keys are literal aliases). An unknown algorithm or rule list is a violation.",
)
def s3_bucket_cmk_encryption(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    log_targets = log_target_buckets(stack)
    for bucket in stack.of_type(*BUCKET_TYPES):
        rules = _sse_rules(bucket, stack)
        fix = (
            "add a BucketServerSideEncryptionConfiguration with sse_algorithm 'aws:kms' and "
            "kms_master_key_id set to the stack's data key"
        )
        if rules is None:
            yield violation(
                f"bucket {bucket.name!r} has no default encryption configuration", fix, bucket.urn
            )
            continue
        defaults = [dig(r, "applyServerSideEncryptionByDefault") for r in rules]
        algorithms = [dig(d, "sseAlgorithm") for d in defaults]
        if bucket.urn in log_targets:
            if not any(a in ("AES256", *KMS_ALGORITHMS) for a in algorithms):
                yield violation(
                    f"access-log bucket {bucket.name!r} has no default encryption (algorithms {algorithms})",
                    "set sse_algorithm 'AES256' (S3 delivers server access logs only to SSE-S3 buckets)",
                    bucket.urn,
                )
            continue
        kms = [d for d, a in zip(defaults, algorithms, strict=True) if a in KMS_ALGORITHMS]
        if not kms:
            shown = [str(a) for a in algorithms]
            yield violation(f"bucket {bucket.name!r} uses {shown} instead of SSE-KMS", fix, bucket.urn)
        elif not all(key_is_customer_managed(dig(d, "kmsMasterKeyId")) for d in kms):
            keys = [dig(d, "kmsMasterKeyId") for d in kms]
            yield violation(
                f"bucket {bucket.name!r} uses SSE-KMS with the AWS managed key (kms_master_key_id {keys})",
                "set kms_master_key_id to the stack's customer managed data key",
                bucket.urn,
            )


def _ebs_blocks(r: Res) -> list[tuple[str, object]]:
    """(where, ebs block) of every EBS volume a launch template or instance declares."""
    if r.type == LAUNCH_TEMPLATE:
        return [
            (f"blockDeviceMappings[{i}]", dig(m, "ebs"))
            for i, m in enumerate(as_list(r.get("blockDeviceMappings")))
        ]
    blocks = []
    if r.get("rootBlockDevice") is not None:
        blocks.append(("rootBlockDevice", r.get("rootBlockDevice")))
    blocks += [(f"ebsBlockDevices[{i}]", b) for i, b in enumerate(as_list(r.get("ebsBlockDevices")))]
    return blocks


EBS_DOC = "https://docs.aws.amazon.com/ebs/latest/userguide/ebs-encryption.html"
EBS_STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"


@resource_rule(
    "ebs-cmk-encryption",
    description="Every EBS volume a node, instance or storage class creates is encrypted under a customer "
    "managed key.",
    severity=HIGH,
    doc=EBS_DOC,
    types=(LAUNCH_TEMPLATE, INSTANCE, "aws:ebs/volume:Volume", NODE_GROUP, EBS_STORAGE_CLASS, EC2_NODE_CLASS),
    unknowns="An unknown key id counts as a customer managed key (computed from a key of this update); "
    "an unknown 'encrypted' flag is a violation.",
)
def ebs_cmk_encryption(r: Res, ctx: Ctx) -> Iterator[Violation]:
    fix = "set encrypted: true and kms_key_id to the stack's EBS key"
    if r.type == NODE_GROUP:
        if r.get("launchTemplate") is None:
            yield violation(
                "the node group has no launch template: its volumes get the account's default EBS "
                "encryption, not the stack's key",
                "give the node group a launch template whose block device mappings use the EBS key",
            )
        return
    if r.type == "aws:ebs/volume:Volume":
        blocks = [("volume", {"encrypted": r.get("encrypted"), "kmsKeyId": r.get("kmsKeyId")})]
    elif r.type == EBS_STORAGE_CLASS:
        if r.get("provisioner") != "ebs.csi.aws.com":
            return
        params = r.get("parameters")
        blocks = [
            ("parameters", {"encrypted": dig(params, "encrypted"), "kmsKeyId": dig(params, "kmsKeyId")})
        ]
    elif r.type == EC2_NODE_CLASS:
        blocks = [
            (
                f"spec.blockDeviceMappings[{i}]",
                {"encrypted": dig(m, "ebs", "encrypted"), "kmsKeyId": dig(m, "ebs", "kmsKeyID")},
            )
            for i, m in enumerate(as_list(r.get("spec", "blockDeviceMappings")))
        ]
        if not blocks:
            yield violation(
                "the EC2NodeClass sets no blockDeviceMappings: Karpenter's default root volume is not "
                "encrypted with the stack's key",
                "add spec.blockDeviceMappings with ebs.encrypted: true and ebs.kmsKeyID",
            )
    else:
        blocks = _ebs_blocks(r)
        if r.type == LAUNCH_TEMPLATE and not blocks:
            yield violation(
                "the launch template declares no block device mappings: the root volume follows the AMI "
                "and the account default, not the stack's key",
                "add a block device mapping for the root volume with encrypted 'true' and the EBS key",
            )
    for where, ebs in blocks:
        if ebs is None:
            continue
        encrypted = truthy(dig(ebs, "encrypted"))
        key = dig(ebs, "kmsKeyId")
        if encrypted is not True:
            yield violation(f"{where}: volume not encrypted (encrypted={encrypted})", fix)
        elif not key_is_customer_managed(key):
            yield violation(f"{where}: encrypted with the default EBS key (kms key {key})", fix)


@resource_rule(
    "eks-secrets-encryption",
    description="EKS clusters envelope-encrypt Kubernetes secrets with a customer managed key.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/eks/latest/userguide/envelope-encryption.html",
    types=("aws:eks/cluster:Cluster",),
    unknowns="An unknown key ARN counts as a customer managed key (computed from a key of this update); "
    "an unknown resources list is a violation.",
)
def eks_secrets_encryption(r: Res, ctx: Ctx) -> Iterator[Violation]:
    config = r.get("encryptionConfig")
    resources = dig(config, "resources")
    key = dig(config, "provider", "keyArn")
    if config is None or resources is UNKNOWN or "secrets" not in as_list(resources):
        yield violation(
            f"secrets are not envelope-encrypted (encryptionConfig {config})",
            "set encryption_config with resources ['secrets'] and the stack's EKS key",
        )
    elif not key_is_customer_managed(key):
        yield violation(f"secrets key {key!r} is not a customer managed key", "use the stack's EKS key")


ECR_TYPES = ("aws:ecr/repository:Repository", "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")


@resource_rule(
    "ecr-cmk-encryption",
    description="ECR repositories (and the templates replicas are created from) use KMS encryption with a "
    "customer managed key.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AmazonECR/latest/userguide/encryption-at-rest.html",
    types=ECR_TYPES,
    unknowns="An unknown key counts as a customer managed key; an unknown encryption type is a violation.",
)
def ecr_cmk_encryption(r: Res, ctx: Ctx) -> Iterator[Violation]:
    configs = as_list(r.get("encryptionConfigurations"))
    kind = dig(configs, 0, "encryptionType")
    key = dig(configs, 0, "kmsKey")
    fix = "set encryption_configurations [{encryption_type: 'KMS', kms_key: <the stack's data key>}]"
    if kind not in ("KMS", "KMS_DSSE"):
        yield violation(f"images are encrypted with {kind or 'AES256 (the default)'}, not KMS", fix)
    elif not key_is_customer_managed(key):
        yield violation(f"KMS encryption with the AWS managed key aws/ecr (kms_key {key})", fix)


@resource_rule(
    "log-group-cmk-encryption",
    description="CloudWatch log groups are encrypted with a customer managed key.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/AmazonCloudWatch/latest/logs/encrypt-log-data-kms.html",
    types=("aws:cloudwatch/logGroup:LogGroup",),
    unknowns="An unknown key id counts as a customer managed key (computed from a key of this update).",
)
def log_group_cmk_encryption(r: Res, ctx: Ctx) -> Iterator[Violation]:
    key = r.get("kmsKeyId")
    if not key_is_customer_managed(key):
        yield violation(
            f"log group {r.get('name') or r.name!r} is not encrypted with a customer managed key",
            "set kms_key_id to the stack's logs key (its policy must let logs.<region>.amazonaws.com use it)",
        )


FSX_TYPES = (
    "aws:fsx/lustreFileSystem:LustreFileSystem",
    "aws:fsx/openZfsFileSystem:OpenZfsFileSystem",
    "aws:fsx/windowsFileSystem:WindowsFileSystem",
    "aws:fsx/ontapFileSystem:OntapFileSystem",
)


@resource_rule(
    "fsx-cmk-encryption",
    description="FSx file systems are encrypted with a customer managed key (Lustre: a PERSISTENT "
    "deployment type; scratch file systems cannot take one).",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/fsx/latest/LustreGuide/encryption-at-rest.html",
    types=FSX_TYPES,
    unknowns="An unknown key counts as a customer managed key; an unknown Lustre deployment type is a "
    "violation.",
)
def fsx_cmk_encryption(r: Res, ctx: Ctx) -> Iterator[Violation]:
    key = r.get("kmsKeyId")
    if r.type == FSX_TYPES[0]:
        deployment = r.get("deploymentType") or "SCRATCH_1"
        if deployment is UNKNOWN or not str(deployment).startswith("PERSISTENT"):
            yield violation(
                f"Lustre deployment type {deployment} is encrypted with an FSx-managed key only",
                "use deployment_type PERSISTENT_2 (or PERSISTENT_1) with kms_key_id set to the stack's key",
            )
            return
    if not key_is_customer_managed(key):
        yield violation("no customer managed key (kms_key_id unset: the FSx default key)", "set kms_key_id")
