"""KeyGuard: who administers the stack's keys, who may delete them, and who hears about it.

* a key administrator role (manages the keys through IAM, denied every cryptographic action by the key
  policies) and a break-glass role (the only principal the key policies let schedule deletion or disable
  a protected key; can also turn off the cluster's deletion protection). Both trust the account root, so
  who may assume them is decided by IAM policies in the account; their permissions are limited to keys
  tagged with the stack's keyset (``aws:ResourceTag``).
* an EventBridge rule on the default bus of the stack's region for the CloudTrail events
  ``ScheduleKeyDeletion`` and ``DisableKey``, to an SNS topic encrypted with the logs key; in every other
  region where the stack owns keys (the replica keys) a rule forwards the same events to the home
  region's default bus. https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-region.html
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.core import iam
from infra.keys.documents import iam as keys_iam
from infra.resources.aws import fixed_name

# CloudTrail management events reach EventBridge as "AWS API Call via CloudTrail" on the default bus of
# the region where the call happened (a trail must be logging).
# https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-cloudtrail.html
KEY_EVENTS = ("ScheduleKeyDeletion", "DisableKey")


def key_event_pattern() -> dict[str, object]:
    """The EventBridge pattern for the key events we alert on."""
    return {
        "source": ["aws.kms"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {"eventSource": ["kms.amazonaws.com"], "eventName": list(KEY_EVENTS)},
    }


@dataclass(frozen=True, kw_only=True)
class KeyGuardArgs:
    """Inputs of KeyGuard; names are decided by the caller. ``forward_regions``: other regions with keys of
    this stack; ``topic_key_arn``: the key the alerts topic is encrypted with."""

    key_admin_role_name: str
    break_glass_role_name: str
    keyset: str
    account_id: str
    partition: str
    region: str
    cluster_arn: str
    rule_name: str
    topic_name: str
    topic_key_arn: pulumi.Input[str]
    forward_regions: Sequence[str] = ()
    alert_emails: Sequence[str] = field(default_factory=tuple)


class KeyGuard(pulumi.ComponentResource):
    """Key administrator and break-glass roles, and alerts on key deletion and disabling."""

    key_admin_role_arn: pulumi.Output[str]
    break_glass_role_arn: pulumi.Output[str]
    topic_arn: pulumi.Output[str]

    def __init__(self, name: str, args: KeyGuardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:keyguard:KeyGuard", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        admin = self._account_role(
            f"{name}-key-admin",
            args,
            role_name=args.key_admin_role_name,
            description="Administers the stack's KMS keys; never uses them",
            policy=keys_iam.key_admin_policy(
                account_id=args.account_id, partition=args.partition, keyset_tag=args.keyset
            ),
        )
        glass = self._account_role(
            f"{name}-break-glass",
            args,
            role_name=args.break_glass_role_name,
            description="Break glass: the only principal that may delete or disable protected keys",
            policy=keys_iam.break_glass_policy(
                account_id=args.account_id,
                partition=args.partition,
                keyset_tag=args.keyset,
                cluster_arn=args.cluster_arn,
            ),
        )
        self.key_admin_role_arn = admin.arn
        self.break_glass_role_arn = glass.arn

        events = f"arn:{args.partition}:events"
        home_rule_arn = f"{events}:{args.region}:{args.account_id}:rule/{args.rule_name}"
        topic = aws.sns.Topic(
            f"{name}-alerts",
            name=args.topic_name,
            kms_master_key_id=args.topic_key_arn,
            opts=fixed_name(child),
        )
        topic_policy = aws.sns.TopicPolicy(
            f"{name}-alerts-policy",
            arn=topic.arn,
            policy=topic.arn.apply(
                lambda arn: json.dumps(
                    keys_iam.alerts_topic_policy(
                        topic_arn=arn, rule_arns=[home_rule_arn], account_id=args.account_id
                    )
                )
            ),
            opts=child,
        )
        for i, address in enumerate(args.alert_emails):
            aws.sns.TopicSubscription(
                f"{name}-alerts-email-{i}", topic=topic.arn, protocol="email", endpoint=address, opts=child
            )
        pattern = json.dumps(key_event_pattern())
        rule = aws.cloudwatch.EventRule(
            f"{name}-key-events",
            name=args.rule_name,
            description="KMS key scheduled for deletion or disabled",
            event_pattern=pattern,
            opts=fixed_name(child),
        )
        # Events delivered before the topic policy lets EventBridge publish are dropped.
        aws.cloudwatch.EventTarget(
            f"{name}-key-events-topic",
            rule=rule.name,
            arn=topic.arn,
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[topic_policy])),
        )
        self.topic_arn = topic.arn

        if args.forward_regions:
            home_bus = f"{events}:{args.region}:{args.account_id}:event-bus/default"
            rule_arns = [
                f"{events}:{r}:{args.account_id}:rule/{args.rule_name}" for r in sorted(args.forward_regions)
            ]
            forward = aws.iam.Role(
                f"{name}-forward-role",
                assume_role_policy=json.dumps(
                    iam.service_trust_policy("events.amazonaws.com", args.account_id, source_arn=rule_arns)
                ),
                description="EventBridge forwards key events of other regions to the home region",
                opts=child,
            )
            aws.iam.RolePolicy(
                f"{name}-forward-role-policy",
                role=forward.id,
                policy=json.dumps(keys_iam.event_forward_policy(home_bus)),
                opts=child,
            )
            for region in sorted(args.forward_regions):
                remote = aws.cloudwatch.EventRule(
                    f"{name}-key-events-{region}",
                    name=args.rule_name,
                    description=f"KMS key events of {region}, forwarded to {args.region}",
                    event_pattern=pattern,
                    region=region,
                    opts=fixed_name(child),
                )
                aws.cloudwatch.EventTarget(
                    f"{name}-key-events-{region}-home",
                    rule=remote.name,
                    arn=home_bus,
                    role_arn=forward.arn,
                    region=region,
                    opts=child,
                )
        self.register_outputs(
            {
                "key_admin_role_arn": self.key_admin_role_arn,
                "break_glass_role_arn": self.break_glass_role_arn,
                "topic_arn": self.topic_arn,
            }
        )

    def _account_role(
        self, resource_name: str, args: KeyGuardArgs, *, role_name: str, description: str, policy: iam.Policy
    ) -> aws.iam.Role:
        """A role named ``role_name`` that the account root trusts (IAM policies in the account decide who
        assumes it), with ``policy`` inline (``<resource_name>-policy``)."""
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(
            resource_name,
            name=role_name,
            assume_role_policy=json.dumps(
                iam.account_trust_policy(partition=args.partition, account_id=args.account_id)
            ),
            description=description,
            max_session_duration=3600,
            opts=fixed_name(child),
        )
        aws.iam.RolePolicy(f"{resource_name}-policy", role=role.id, policy=json.dumps(policy), opts=child)
        return role
