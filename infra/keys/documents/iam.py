"""IAM documents of the keys: key administration, break-glass, the alerts topic and the event forwarding.
Pure."""

from __future__ import annotations

from collections.abc import Sequence

from infra.core.iam import Policy, policy


def key_admin_policy(*, account_id: str, partition: str, keyset_tag: str) -> Policy:
    """The key administrator role: manage the stack's keys (tagged ``aiplat:keyset``), never use them.

    The key policies also deny it every cryptographic action, so a broader IAM policy cannot give it one.
    https://docs.aws.amazon.com/kms/latest/developerguide/key-policy-default.html#key-policy-default-allow-administrators
    """
    return policy(
        {
            "Sid": "AdministerStackKeys",
            "Effect": "Allow",
            "Action": KEY_ADMIN_ACTIONS,
            "Resource": f"arn:{partition}:kms:*:{account_id}:key/*",
            "Condition": {"StringEquals": {"aws:ResourceTag/aiplat:keyset": keyset_tag}},
        },
        {
            "Sid": "ListKeys",
            "Effect": "Allow",
            "Action": ["kms:ListKeys", "kms:ListAliases"],
            "Resource": "*",
        },
    )


# What break-glass does to the stack's keys: remove a stack on purpose (schedule deletion, disable), undo
# that, and repair a key policy (the key policies deny kms:PutKeyPolicy to all but break-glass and the
# deployer, the account root included: without this allow nobody could repair a key whose deployer role is
# gone). An explicit Allow is needed besides the Deny's exemption (the key policy delegates to IAM).
BREAK_GLASS_KEY_ACTIONS = [
    "kms:ScheduleKeyDeletion",
    "kms:CancelKeyDeletion",
    "kms:DisableKey",
    "kms:EnableKey",
    "kms:DescribeKey",
    "kms:GetKeyPolicy",
    "kms:PutKeyPolicy",
]


def break_glass_policy(*, account_id: str, partition: str, keyset_tag: str, cluster_arn: str) -> Policy:
    """The break-glass role's own statements: the stack's keys (``BREAK_GLASS_KEY_ACTIONS``) and the
    cluster's deletion protection. Its writes to the release path and the bucket administration the bucket
    policies reserve for it are granted where those buckets are declared (infra/storage)."""
    return policy(
        {
            "Sid": "GuardStackKeys",
            "Effect": "Allow",
            "Action": BREAK_GLASS_KEY_ACTIONS,
            "Resource": f"arn:{partition}:kms:*:{account_id}:key/*",
            "Condition": {"StringEquals": {"aws:ResourceTag/aiplat:keyset": keyset_tag}},
        },
        {
            "Sid": "UnprotectCluster",
            "Effect": "Allow",
            "Action": ["eks:DescribeCluster", "eks:UpdateClusterConfig", "eks:DeleteCluster"],
            "Resource": cluster_arn,
        },
    )


# Administrative KMS actions (the default key policy's key-administrator list) without any cryptographic
# operation, without kms:CreateGrant, which could hand the holder a decrypt grant, and without kms:Put*
# (PutKeyPolicy): rewriting a key policy is break-glass's (and the deployer's), denied to all others.
KEY_ADMIN_ACTIONS = [
    "kms:Describe*",
    "kms:List*",
    "kms:Get*",
    "kms:Update*",
    "kms:Enable*",
    "kms:Revoke*",
    "kms:TagResource",
    "kms:UntagResource",
    "kms:CreateAlias",
    "kms:DeleteAlias",
    "kms:RotateKeyOnDemand",
]


def alerts_topic_policy(*, topic_arn: str, rule_arns: Sequence[str], account_id: str) -> Policy:
    """SNS topic policy: EventBridge may publish for our rules only.

    https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-use-resource-based.html#eb-sns-permissions
    """
    return policy(
        {
            "Sid": "EventBridgePublishes",
            "Effect": "Allow",
            "Principal": {"Service": "events.amazonaws.com"},
            "Action": "sns:Publish",
            "Resource": topic_arn,
            "Condition": {
                "ArnEquals": {"aws:SourceArn": list(rule_arns)},
                "StringEquals": {"aws:SourceAccount": account_id},
            },
        }
    )


def mfa_trust_policy(principals: Sequence[str]) -> Policy:
    """Trust for named principals (role ARNs), only in a session authenticated with MFA.

    https://docs.aws.amazon.com/IAM/latest/UserGuide/id_credentials_mfa_configure-api-require.html
    """
    return policy(
        {
            "Sid": "NamedPrincipalsWithMfa",
            "Effect": "Allow",
            "Principal": {"AWS": sorted(set(principals))},
            "Action": "sts:AssumeRole",
            "Condition": {"Bool": {"aws:MultiFactorAuthPresent": "true"}},
        }
    )


def event_forward_policy(bus_arn: str) -> Policy:
    """What EventBridge needs to forward a rule's events to the default bus of another region."""
    return policy(
        {"Sid": "PutEventsHome", "Effect": "Allow", "Action": "events:PutEvents", "Resource": bus_arn}
    )
