"""KeyGuard: who administers the stack's keys, who may delete them, and who hears about it.

* a key administrator role (manages the keys through IAM, denied every cryptographic action by the key
  policies, never changes a key policy) and a break-glass role (with the deployer, the only principals
  the key policies of a protected key let change the policy; alone, schedule deletion or disable; can
  also turn off the cluster's deletion protection). Both trust named role ARNs from the config, only in an
  MFA session; their permissions are limited to keys tagged with the stack's keyset
  (``aws:ResourceTag``).
* EventBridge rules on the default bus of the stack's region for the CloudTrail events
  ``ScheduleKeyDeletion``, ``DisableKey`` and ``PutKeyPolicy``, and for every ``AssumeRole`` of the
  break-glass role, to an SNS topic encrypted with the logs key; in every other region where the stack owns
  keys (the replica keys) a rule forwards the same events to the home region's default bus.
  https://docs.aws.amazon.com/eventbridge/latest/userguide/eb-cross-region.html
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.core import iam
from infra.keys.documents import iam as keys_iam
from infra.resources.aws import fixed_name

# CloudTrail management events reach EventBridge as "AWS API Call via CloudTrail" on the default bus of
# the region where the call happened (a trail must be logging).
# https://docs.aws.amazon.com/eventbridge/latest/ref/events-ref-cloudtrail.html
KEY_EVENTS = ("ScheduleKeyDeletion", "DisableKey", "PutKeyPolicy")
# STS logs AssumeRole in the region of the endpoint called, the global endpoint's calls in us-east-1: the
# break-glass rule sees assumptions through the regional endpoints of the stack's regions (no rule is put in
# us-east-1 for a stack elsewhere: data residency). docs/platform/security.md says to use those endpoints.
# https://docs.aws.amazon.com/IAM/latest/UserGuide/cloudtrail-integration.html#stscloudtrailregion


def key_event_pattern() -> dict[str, object]:
    """The EventBridge pattern for the key events we alert on."""
    return {
        "source": ["aws.kms"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {"eventSource": ["kms.amazonaws.com"], "eventName": list(KEY_EVENTS)},
    }


def break_glass_event_pattern(role_arn: str) -> dict[str, object]:
    """The EventBridge pattern for every assumption of the break-glass role."""
    return {
        "source": ["aws.sts"],
        "detail-type": ["AWS API Call via CloudTrail"],
        "detail": {
            "eventSource": ["sts.amazonaws.com"],
            "eventName": ["AssumeRole"],
            "requestParameters": {"roleArn": [role_arn]},
        },
    }


@dataclass(frozen=True, kw_only=True)
class EventAlert:
    """One more alert on the guard's topic (another capability's, e.g. infra/audit's trail and bucket-policy
    changes): an EventBridge rule ``rule_name`` with ``pattern`` on the default bus of the stack's region,
    and in each of ``forward_regions`` a rule that forwards the same events there to it."""

    role: str
    rule_name: str
    description: str
    pattern: Mapping[str, object]
    forward_regions: Sequence[str] = ()


@dataclass(frozen=True, kw_only=True)
class KeyGuardArgs:
    """Inputs of KeyGuard; names are decided by the caller. ``forward_regions``: other regions with keys of
    this stack; ``topic_key_arn``: the key the alerts topic is encrypted with; ``*_principals``: the role
    ARNs that may assume the key administrator and break-glass roles (with MFA; empty: the account root,
    with MFA)."""

    key_admin_role_name: str
    break_glass_role_name: str
    keyset: str
    account_id: str
    partition: str
    region: str
    cluster_arn: str
    rule_name: str
    break_glass_rule_name: str
    topic_name: str
    topic_key_arn: pulumi.Input[str]
    forward_regions: Sequence[str] = ()
    alert_emails: Sequence[str] = field(default_factory=tuple)
    key_admin_principals: Sequence[str] = ()
    break_glass_principals: Sequence[str] = ()
    # more alerts to the same topic (EventAlert)
    alerts: Sequence[EventAlert] = ()


class KeyGuard(pulumi.ComponentResource):
    """Key administrator and break-glass roles, and alerts on key deletion and disabling."""

    key_admin_role_arn: pulumi.Output[str]
    break_glass_role_arn: pulumi.Output[str]
    # the role's name as an output: grants declared elsewhere (infra/storage) wait for the role
    break_glass_role_name: pulumi.Output[str]
    topic_arn: pulumi.Output[str]

    def __init__(self, name: str, args: KeyGuardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:keyguard:KeyGuard", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        admin = self._account_role(
            f"{name}-key-admin",
            args,
            role_name=args.key_admin_role_name,
            description="Administers the stack's KMS keys; never uses them",
            principals=args.key_admin_principals,
            policy=keys_iam.key_admin_policy(
                account_id=args.account_id, partition=args.partition, keyset_tag=args.keyset
            ),
        )
        glass = self._account_role(
            f"{name}-break-glass",
            args,
            role_name=args.break_glass_role_name,
            description="Break glass: the only principal that may delete or disable protected keys",
            principals=args.break_glass_principals,
            policy=keys_iam.break_glass_policy(
                account_id=args.account_id,
                partition=args.partition,
                keyset_tag=args.keyset,
                cluster_arn=args.cluster_arn,
            ),
        )
        self.key_admin_role_arn = admin.arn
        self.break_glass_role_arn = glass.arn
        self.break_glass_role_name = glass.name

        events = f"arn:{args.partition}:events"
        rule_arn = f"{events}:{args.region}:{args.account_id}:rule/"
        home_rule_arns = [
            rule_arn + n
            for n in (args.rule_name, args.break_glass_rule_name, *(a.rule_name for a in args.alerts))
        ]
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
                        topic_arn=arn, rule_arns=home_rule_arns, account_id=args.account_id
                    )
                )
            ),
            opts=child,
        )
        for i, address in enumerate(args.alert_emails):
            aws.sns.TopicSubscription(
                f"{name}-alerts-email-{i}", topic=topic.arn, protocol="email", endpoint=address, opts=child
            )
        self.topic_arn = topic.arn
        glass_arn = f"arn:{args.partition}:iam::{args.account_id}:role/{args.break_glass_role_name}"
        alerts = [
            (
                "key-events",
                args.rule_name,
                "KMS key scheduled for deletion, disabled or its policy changed",
                key_event_pattern(),
                sorted(set(args.forward_regions) - {args.region}),
            ),
            (
                "break-glass",
                args.break_glass_rule_name,
                "The break-glass role was assumed",
                break_glass_event_pattern(glass_arn),
                sorted(set(args.forward_regions) - {args.region}),
            ),
        ] + [
            (
                a.role,
                a.rule_name,
                a.description,
                dict(a.pattern),
                sorted(set(a.forward_regions) - {args.region}),
            )
            for a in args.alerts
        ]
        # Events delivered before the topic policy lets EventBridge publish are dropped.
        after_policy = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[topic_policy]))
        for role, rule_name, description, pattern, _ in alerts:
            rule = aws.cloudwatch.EventRule(
                f"{name}-{role}",
                name=rule_name,
                description=description,
                event_pattern=json.dumps(pattern),
                opts=fixed_name(child),
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{role}-topic", rule=rule.name, arn=topic.arn, opts=after_policy
            )

        forwarded = [(role, rule_name, pattern, r) for role, rule_name, _, pattern, rs in alerts for r in rs]
        if forwarded:
            home_bus = f"{events}:{args.region}:{args.account_id}:event-bus/default"
            rule_arns = sorted({f"{events}:{r}:{args.account_id}:rule/{n}" for _, n, _, r in forwarded})
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
            for role, rule_name, pattern, region in forwarded:
                remote = aws.cloudwatch.EventRule(
                    f"{name}-{role}-{region}",
                    name=rule_name,
                    description=f"{role} events of {region}, forwarded to {args.region}",
                    event_pattern=json.dumps(pattern),
                    region=region,
                    opts=fixed_name(child),
                )
                aws.cloudwatch.EventTarget(
                    f"{name}-{role}-{region}-home",
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
                "break_glass_role_name": self.break_glass_role_name,
                "topic_arn": self.topic_arn,
            }
        )

    def _account_role(
        self,
        resource_name: str,
        args: KeyGuardArgs,
        *,
        role_name: str,
        description: str,
        policy: iam.Policy,
        principals: Sequence[str],
    ) -> aws.iam.Role:
        """A role named ``role_name`` that ``principals`` (or, when none, the account root) may assume in an
        MFA session, with ``policy`` inline (``<resource_name>-policy``)."""
        child = pulumi.ResourceOptions(parent=self)
        trusted = list(principals) or [iam.account_root(args.partition, args.account_id)]
        role = aws.iam.Role(
            resource_name,
            name=role_name,
            assume_role_policy=json.dumps(keys_iam.mfa_trust_policy(trusted)),
            description=description,
            max_session_duration=3600,
            opts=fixed_name(child),
        )
        aws.iam.RolePolicy(f"{resource_name}-policy", role=role.id, policy=json.dumps(policy), opts=child)
        return role
