"""Buckets: the stack's S3 buckets (datasets, checkpoints, artifacts) and their access-log bucket.

Every data bucket gets pulumi-aws v7's separate S3 resources: SSE-KMS with S3 Bucket Keys under the team's
key, versioning, all four public-access blocks, ACLs disabled (BucketOwnerEnforced), a policy that refuses
requests without TLS, lifecycle rules and server access logging. The same component builds the replica
buckets of inference regions (``region`` set: v7's per-resource region, same provider and default tags).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.resources.aws import fixed_name, protected
from infra.storage import documents as storage_documents

# SSE-C uploads are refused by the bucket itself (new buckets do so by default since 2026; said explicitly
# so that the setting is ours), and by the bucket policy.
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/specifying-s3-c-encryption.html
BLOCKED_ENCRYPTION = ["SSE-C"]


def block_public_access(
    role: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions, region: str | None = None
) -> list[pulumi.Resource]:
    """ACLs off and all four public-access blocks on for ``bucket``; returned so its policy waits for them."""
    ownership = aws.s3.BucketOwnershipControls(
        f"{role}-ownership",
        bucket=bucket.id,
        # ACLs disabled: access is decided by policies alone.
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/about-object-ownership.html
        rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
        region=region,
        opts=opts,
    )
    block = aws.s3.BucketPublicAccessBlock(
        f"{role}-public-access",
        bucket=bucket.id,
        block_public_acls=True,
        block_public_policy=True,
        ignore_public_acls=True,
        restrict_public_buckets=True,
        region=region,
        opts=opts,
    )
    return [ownership, block]


def enable_versioning(
    role: str, bucket: aws.s3.Bucket, opts: pulumi.ResourceOptions, region: str | None = None
) -> aws.s3.BucketVersioning:
    """Versioning on for ``bucket`` (lifecycle rules on noncurrent versions wait for it)."""
    return aws.s3.BucketVersioning(
        f"{role}-versioning",
        bucket=bucket.id,
        versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
        region=region,
        opts=opts,
    )


def default_encryption(
    role: str,
    bucket: aws.s3.Bucket,
    opts: pulumi.ResourceOptions,
    *,
    kms_key_arn: pulumi.Input[str] | None = None,
    bucket_key: bool | None = None,
    region: str | None = None,
) -> aws.s3.BucketServerSideEncryptionConfiguration:
    """Default encryption of ``bucket``: SSE-KMS under ``kms_key_arn`` (S3 Bucket Keys per ``bucket_key``),
    or SSE-S3 without a key; SSE-C refused either way."""
    by_default = aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
        sse_algorithm="AES256" if kms_key_arn is None else "aws:kms", kms_master_key_id=kms_key_arn
    )
    return aws.s3.BucketServerSideEncryptionConfiguration(
        f"{role}-sse",
        bucket=bucket.id,
        rules=[
            aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                apply_server_side_encryption_by_default=by_default,
                bucket_key_enabled=bucket_key,
                blocked_encryption_types=BLOCKED_ENCRYPTION,
            )
        ],
        region=region,
        opts=opts,
    )


@dataclass(frozen=True, kw_only=True)
class NoncurrentRule:
    """What happens to noncurrent object versions of one bucket (days after they become noncurrent)."""

    expire_days: int
    ia_days: int | None = None  # move to STANDARD_IA first (S3 requires >= 30)


@dataclass(frozen=True, kw_only=True)
class BucketsArgs:
    """Inputs of Buckets.

    ``names`` maps a purpose (``datasets``...) to the bucket's physical name; ``noncurrent`` the lifecycle of
    old versions per purpose (a purpose without an entry keeps them). ``region`` places every bucket in
    another region than the provider's (replicas). ``protect``: Pulumi protect + retain_on_delete on every
    bucket. ``min_tls``: lowest TLS version the bucket policies accept. ``extra_log_sources``: names of other
    buckets of the stack that log into the access-log bucket (the trail bucket). ``release_guards``: per
    purpose, who may write its ``release/`` and administer the bucket (``storage_documents.ReleaseGuard``).
    ``admins``: who administers the other data buckets (``storage_documents.admin_guard_statement``; empty:
    no guard, when the stack names no deployer role and ``pulumi up`` would lock itself out).
    """

    names: Mapping[str, str]
    log_bucket_name: str
    kms_key_arn: pulumi.Input[str]
    account_id: str
    abort_multipart_days: int
    log_expire_days: int
    noncurrent: Mapping[str, NoncurrentRule] = field(default_factory=dict)
    region: str | None = None
    partition: str = "aws"
    protect: bool = False
    min_tls: str = "1.2"
    extra_log_sources: Sequence[str] = ()
    # the Region's load balancers (the inference ALBs, in the replica Regions) deliver access logs here
    load_balancer_logs: bool = False
    # purpose -> who may change its release path (the artifacts bucket, its replicas)
    release_guards: Mapping[str, storage_documents.ReleaseGuard] = field(default_factory=dict)
    # the role ARNs that alone administer the buckets without a release guard (break-glass, the deployer)
    admins: Sequence[str] = ()
    # the stack's S3 gateway endpoint: the data buckets' objects only through it, but for these principal
    # ARN patterns (storage_documents.EndpointGuard); None: no such guard (the replica buckets)
    s3_endpoint_id: pulumi.Input[str] | None = None
    outside_endpoint: Sequence[str] = ()


class Buckets(pulumi.ComponentResource):
    """Encrypted, private, versioned, TLS-only buckets with lifecycle rules and access logging."""

    bucket_names: dict[str, pulumi.Output[str]]
    bucket_arns: dict[str, pulumi.Output[str]]
    log_bucket_name: pulumi.Output[str]
    log_bucket_arn: pulumi.Output[str]

    def __init__(self, name: str, args: BucketsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:buckets:Buckets", name, None, opts)
        self._args = args
        child = pulumi.ResourceOptions(parent=self)
        self.buckets: dict[str, aws.s3.Bucket] = {}

        # Access logs first: the data buckets log into it. Server access logs can only be delivered to a
        # bucket encrypted with SSE-S3 (not SSE-KMS), in the same region and account.
        # https://docs.aws.amazon.com/AmazonS3/latest/userguide/enable-server-access-logging.html
        self.log_bucket = self._bucket(f"{name}-access-logs", args.log_bucket_name, child)
        log_controls = block_public_access(f"{name}-access-logs", self.log_bucket, child, args.region)
        default_encryption(f"{name}-access-logs", self.log_bucket, child, region=args.region)
        log_versioning = enable_versioning(f"{name}-access-logs", self.log_bucket, child, args.region)
        # Source ARNs follow from the names (arn:<partition>:s3:::<name>), so the log-delivery grant exists
        # before any bucket starts logging.
        source_arns = [
            f"arn:{args.partition}:s3:::{n}" for n in (*args.names.values(), *args.extra_log_sources)
        ]
        self.log_policy = aws.s3.BucketPolicy(
            f"{name}-access-logs-policy",
            bucket=self.log_bucket.id,
            policy=self.log_bucket.arn.apply(lambda arn: json.dumps(self._log_policy(arn, source_arns))),
            region=args.region,
            opts=pulumi.ResourceOptions(parent=self, depends_on=log_controls),
        )
        self._lifecycle(
            f"{name}-access-logs",
            self.log_bucket,
            # Old versions of access logs stay as long as the logs themselves (audit evidence).
            NoncurrentRule(expire_days=args.log_expire_days),
            args.log_expire_days,
            log_versioning,
            child,
        )

        for purpose, bucket_name in args.names.items():
            role = f"{name}-{purpose}"
            bucket = self._bucket(role, bucket_name, child)
            self.buckets[purpose] = bucket
            controls = block_public_access(role, bucket, child, args.region)
            # Bucket Keys cut KMS requests (and cost) by orders of magnitude for many objects.
            # https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucket-key.html
            default_encryption(
                role, bucket, child, kms_key_arn=args.kms_key_arn, bucket_key=True, region=args.region
            )
            versioning = enable_versioning(role, bucket, child, args.region)
            guard = args.release_guards.get(purpose)
            aws.s3.BucketPolicy(
                f"{role}-policy",
                bucket=bucket.id,
                policy=pulumi.Output.all(bucket.arn, args.kms_key_arn, args.s3_endpoint_id).apply(
                    # guard and purpose bound now: the callback runs after the loop has moved on
                    lambda v, guard=guard, purpose=purpose: json.dumps(
                        storage_documents.with_run_records_kept(
                            storage_documents.bucket_policy(
                                v[0],
                                kms_key_arn=v[1],
                                min_tls=args.min_tls,
                                release_guard=guard,
                                admins=() if guard is not None else args.admins,
                                endpoint=storage_documents.EndpointGuard(
                                    endpoint_id=v[2], exempt=tuple(args.outside_endpoint)
                                )
                                if v[2]
                                else None,
                            ),
                            v[0],
                            outputs=purpose == "checkpoints",
                        )
                    )
                ),
                region=args.region,
                opts=pulumi.ResourceOptions(parent=self, depends_on=controls),
            )
            self._lifecycle(role, bucket, args.noncurrent.get(purpose), None, versioning, child)
            aws.s3.BucketLogging(
                f"{role}-logging",
                bucket=bucket.id,
                target_bucket=self.log_bucket.id,
                target_prefix=f"{bucket_name}/",
                # Date-partitioned keys keep log queries (Athena) cheap.
                target_object_key_format=aws.s3.BucketLoggingTargetObjectKeyFormatArgs(
                    partitioned_prefix=aws.s3.BucketLoggingTargetObjectKeyFormatPartitionedPrefixArgs(
                        partition_date_source="EventTime"
                    )
                ),
                region=args.region,
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.log_policy]),
            )

        self.bucket_names = {p: b.bucket for p, b in self.buckets.items()}
        self.bucket_arns = {p: b.arn for p, b in self.buckets.items()}
        self.log_bucket_name = self.log_bucket.bucket
        self.log_bucket_arn = self.log_bucket.arn
        self.register_outputs(
            {
                "bucket_names": self.bucket_names,
                "bucket_arns": self.bucket_arns,
                "log_bucket_name": self.log_bucket_name,
                "log_bucket_arn": self.log_bucket_arn,
            }
        )

    def _log_policy(self, log_bucket_arn: str, source_arns: list[str]) -> dict:
        """The access-log bucket's policy: S3 server access logs of our buckets, and with
        ``load_balancer_logs`` the Region's load balancers' access logs."""
        args = self._args
        doc = storage_documents.access_log_bucket_policy(
            log_bucket_arn, source_arns, args.account_id, min_tls=args.min_tls
        )
        if args.load_balancer_logs:
            assert args.region is not None  # replicas only: the inference Regions
            doc = storage_documents.with_load_balancer_logs(
                doc, log_bucket_arn, account_id=args.account_id, region=args.region, partition=args.partition
            )
        return doc

    def _bucket(self, role: str, bucket_name: str, opts: pulumi.ResourceOptions) -> aws.s3.Bucket:
        return aws.s3.Bucket(
            role,
            bucket=bucket_name,
            region=self._args.region,
            opts=protected(fixed_name(opts), self._args.protect),
        )

    def _lifecycle(
        self,
        role: str,
        bucket: aws.s3.Bucket,
        noncurrent: NoncurrentRule | None,
        expire_days: int | None,
        versioning: aws.s3.BucketVersioning,
        opts: pulumi.ResourceOptions,
    ) -> aws.s3.BucketLifecycleConfiguration:
        rules = [
            aws.s3.BucketLifecycleConfigurationRuleArgs(
                id="abort-incomplete-multipart-uploads",
                status="Enabled",
                filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(  # noqa: E501
                    days_after_initiation=self._args.abort_multipart_days
                ),
            )
        ]
        if noncurrent is not None:
            transitions = (
                [
                    aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionTransitionArgs(
                        noncurrent_days=noncurrent.ia_days, storage_class="STANDARD_IA"
                    )
                ]
                if noncurrent.ia_days
                else None
            )
            rules.append(
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="noncurrent-versions",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    noncurrent_version_transitions=transitions,
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=noncurrent.expire_days
                    ),
                )
            )
        if expire_days is not None:
            rules.append(
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-objects",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(days=expire_days),
                )
            )
        # Lifecycle rules on noncurrent versions need versioning in place first.
        return aws.s3.BucketLifecycleConfiguration(
            f"{role}-lifecycle",
            bucket=bucket.id,
            rules=rules,
            region=self._args.region,
            opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[versioning])),
        )
