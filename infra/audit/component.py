"""AuditTrail: a multi-region CloudTrail trail into an S3 Object Lock bucket, and optional GuardDuty.

The trail logs management events everywhere and S3 data events of the given buckets, with log file
validation, under the logs key; the bucket has Object Lock retention, versioning, SSE-KMS, no public access
or ACLs, a policy for our trail over TLS only, expiry after the retention and access logging
(docs/platform/security.md). GuardDuty adds EKS audit log and runtime monitoring.
https://docs.aws.amazon.com/awscloudtrail/latest/userguide/logging-data-events-with-cloudtrail.html
https://docs.aws.amazon.com/AmazonS3/latest/userguide/object-lock.html
https://docs.aws.amazon.com/guardduty/latest/ug/runtime-monitoring.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.audit import documents as audit_documents
from infra.resources.aws import fixed_name, protected
from infra.storage.component.buckets import block_public_access, default_encryption, enable_versioning


@dataclass(frozen=True, kw_only=True)
class AuditTrailArgs:
    """Inputs of AuditTrail; names are decided by the caller.

    ``data_event_bucket_arns``: buckets whose object reads and writes are logged; ``access_log_bucket``:
    where the trail bucket's server access logs go (None: not logged).
    """

    trail_name: str
    trail_arn: str
    bucket_name: str
    account_id: str
    logs_key_arn: pulumi.Input[str]
    retention_days: int
    object_lock_mode: str
    data_event_bucket_arns: Sequence[pulumi.Input[str]] = ()
    access_log_bucket: pulumi.Input[str] | None = None
    min_tls: str = "1.2"
    protect: bool = False
    guardduty: bool = False


class AuditTrail(pulumi.ComponentResource):
    """The stack's CloudTrail trail, its Object Lock bucket, and GuardDuty when asked for."""

    trail_arn: pulumi.Output[str]
    bucket_name: pulumi.Output[str]

    def __init__(self, name: str, args: AuditTrailArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:audit:AuditTrail", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        bucket = aws.s3.Bucket(
            f"{name}-bucket",
            bucket=args.bucket_name,
            # Object Lock on from the start (it also turns versioning on for good).
            object_lock_enabled=True,
            opts=protected(fixed_name(child), args.protect),
        )
        versioning = enable_versioning(f"{name}-bucket", bucket, child)
        aws.s3.BucketObjectLockConfiguration(
            f"{name}-bucket-object-lock",
            bucket=bucket.id,
            object_lock_enabled="Enabled",
            rule=aws.s3.BucketObjectLockConfigurationRuleArgs(
                default_retention=aws.s3.BucketObjectLockConfigurationRuleDefaultRetentionArgs(
                    mode=args.object_lock_mode, days=args.retention_days
                )
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        # CloudTrail encrypts log and digest files itself with the trail's key (the logs key, under its own
        # encryption context); the bucket default is the same key for anything else, without S3 Bucket
        # Keys, which would replace that context with the bucket's.
        # https://docs.aws.amazon.com/awscloudtrail/latest/userguide/create-kms-key-policy-for-cloudtrail.html
        default_encryption(f"{name}-bucket", bucket, child, kms_key_arn=args.logs_key_arn, bucket_key=False)
        controls = block_public_access(f"{name}-bucket", bucket, child)
        bucket_policy = aws.s3.BucketPolicy(
            f"{name}-bucket-policy",
            bucket=bucket.id,
            policy=bucket.arn.apply(
                lambda arn: json.dumps(
                    audit_documents.cloudtrail_bucket_policy(
                        bucket_arn=arn,
                        trail_arn=args.trail_arn,
                        account_id=args.account_id,
                        min_tls=args.min_tls,
                    )
                )
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=controls),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-bucket-lifecycle",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="expire-after-retention",
                    status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=""),
                    expiration=aws.s3.BucketLifecycleConfigurationRuleExpirationArgs(
                        days=args.retention_days
                    ),
                    noncurrent_version_expiration=aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(  # noqa: E501
                        noncurrent_days=args.retention_days
                    ),
                    abort_incomplete_multipart_upload=aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(  # noqa: E501
                        days_after_initiation=7
                    ),
                )
            ],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[versioning]),
        )
        if args.access_log_bucket is not None:
            aws.s3.BucketLogging(
                f"{name}-bucket-logging",
                bucket=bucket.id,
                target_bucket=args.access_log_bucket,
                target_prefix=f"{args.bucket_name}/",
                opts=child,
            )

        selectors = [
            # With advanced selectors management events must be selected explicitly.
            aws.cloudtrail.TrailAdvancedEventSelectorArgs(
                name="management events",
                field_selectors=[
                    aws.cloudtrail.TrailAdvancedEventSelectorFieldSelectorArgs(
                        field="eventCategory", equals=["Management"]
                    )
                ],
            )
        ]
        if args.data_event_bucket_arns:
            selectors.append(
                aws.cloudtrail.TrailAdvancedEventSelectorArgs(
                    name="S3 object reads and writes of the data buckets",
                    field_selectors=[
                        aws.cloudtrail.TrailAdvancedEventSelectorFieldSelectorArgs(
                            field="eventCategory", equals=["Data"]
                        ),
                        aws.cloudtrail.TrailAdvancedEventSelectorFieldSelectorArgs(
                            field="resources.type", equals=["AWS::S3::Object"]
                        ),
                        aws.cloudtrail.TrailAdvancedEventSelectorFieldSelectorArgs(
                            field="resources.ARN",
                            starts_withs=[pulumi.Output.concat(a, "/") for a in args.data_event_bucket_arns],
                        ),
                    ],
                )
            )
        self.trail = aws.cloudtrail.Trail(
            f"{name}-trail",
            name=args.trail_name,
            s3_bucket_name=bucket.id,
            is_multi_region_trail=True,
            include_global_service_events=True,
            enable_log_file_validation=True,
            enable_logging=True,
            kms_key_id=args.logs_key_arn,
            advanced_event_selectors=selectors,
            # CreateTrail checks the bucket policy; it must be in place first.
            opts=fixed_name(pulumi.ResourceOptions(parent=self, depends_on=[bucket_policy])),
        )
        self.trail_arn = self.trail.arn
        self.bucket_name = bucket.bucket

        if args.guardduty:
            detector = aws.guardduty.Detector(f"{name}-guardduty", enable=True, opts=child)
            aws.guardduty.DetectorFeature(
                f"{name}-guardduty-eks-audit",
                detector_id=detector.id,
                name="EKS_AUDIT_LOGS",
                status="ENABLED",
                opts=child,
            )
            aws.guardduty.DetectorFeature(
                f"{name}-guardduty-runtime",
                detector_id=detector.id,
                name="RUNTIME_MONITORING",
                status="ENABLED",
                additional_configurations=[
                    aws.guardduty.DetectorFeatureAdditionalConfigurationArgs(
                        name="EKS_ADDON_MANAGEMENT", status="ENABLED"
                    )
                ],
                opts=child,
            )
        self.register_outputs({"trail_arn": self.trail_arn, "bucket_name": self.bucket_name})
