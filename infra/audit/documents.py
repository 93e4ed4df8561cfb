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
