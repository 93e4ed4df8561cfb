"""The CloudTrail bucket's policy. Pure."""

from __future__ import annotations

from infra.core.iam import Policy, policy
from infra.storage.documents import baseline_denials


def cloudtrail_bucket_policy(
    *, bucket_arn: str, trail_arn: str, account_id: str, min_tls: str = "1.2"
) -> Policy:
    """Policy of the trail bucket: CloudTrail (for our trail only) checks the ACL and writes under
    ``AWSLogs/<account>/``; TLS only.

    https://docs.aws.amazon.com/awscloudtrail/latest/userguide/create-s3-bucket-policy-for-cloudtrail.html
    """
    source = {"StringEquals": {"aws:SourceArn": trail_arn}}
    return policy(
        *baseline_denials(bucket_arn, min_tls),
        {
            "Sid": "CloudTrailAclCheck",
            "Effect": "Allow",
            "Principal": {"Service": "cloudtrail.amazonaws.com"},
            "Action": "s3:GetBucketAcl",
            "Resource": bucket_arn,
            "Condition": source,
        },
        {
            "Sid": "CloudTrailWrite",
            "Effect": "Allow",
            "Principal": {"Service": "cloudtrail.amazonaws.com"},
            "Action": "s3:PutObject",
            "Resource": f"{bucket_arn}/AWSLogs/{account_id}/*",
            "Condition": {
                "StringEquals": {"s3:x-amz-acl": "bucket-owner-full-control", "aws:SourceArn": trail_arn}
            },
        },
    )


# CloudTrail management events reach EventBridge as "AWS API Call via CloudTrail" on the default bus of the
# region where the call was made (a trail must be logging; StopLogging is logged before logging stops).
# https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-cloudtrail.html
# What turns the audit trail off or narrows what it records: stop it, delete it, change its event
# selectors, or update it (its bucket, its key, multi-region, log file validation).
# https://docs.aws.amazon.com/awscloudtrail/latest/APIReference/API_Operations.html
TRAIL_EVENTS = ("StopLogging", "DeleteTrail", "PutEventSelectors", "UpdateTrail")
# What rewrites a bucket's policy, the guards of our buckets (infra/storage/documents.py) among them. S3
# logs these bucket-level calls as management events, with requestParameters.bucketName.
# https://docs.aws.amazon.com/AmazonS3/latest/userguide/cloudtrail-logging-s3-info.html
BUCKET_POLICY_EVENTS = ("PutBucketPolicy", "DeleteBucketPolicy")
# The alerts' names: the runbook pages docs/runbooks/<name>.md (tests/monitoring/test_runbooks.py).
TRAIL_ALERT = "AuditTrailChanged"
BUCKET_POLICY_ALERT = "BucketPolicyChanged"
AUDIT_ALERTS = {
    TRAIL_ALERT: "A CloudTrail trail was stopped, deleted, or its selectors or settings changed",
    BUCKET_POLICY_ALERT: "The policy of one of the stack's buckets was replaced or deleted",
}


def trail_event_pattern() -> dict[str, object]:
    """The EventBridge pattern for :data:`TRAIL_EVENTS` on any trail of the account (an organization trail
    the stack uses, ``security.audit.trail: existing``, as well as its own)."""
    return {
        "source": ["aws.cloudtrail"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {"eventSource": ["cloudtrail.amazonaws.com"], "eventName": list(TRAIL_EVENTS)},
    }


def bucket_policy_event_pattern(bucket_names: list[str]) -> dict[str, object]:
    """The EventBridge pattern for :data:`BUCKET_POLICY_EVENTS` on ``bucket_names`` (the stack's buckets)."""
    if not bucket_names:
        raise ValueError("a bucket-policy alert needs the buckets it watches")
    return {
        "source": ["aws.s3"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {
            "eventSource": ["s3.amazonaws.com"],
            "eventName": list(BUCKET_POLICY_EVENTS),
            "requestParameters": {"bucketName": sorted(set(bucket_names))},
        },
    }
