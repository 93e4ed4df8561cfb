"""The AWS side of serving over HTTPS: the ACM certificate (DNS-validated in a Route 53 zone), the DNS name
that points at the load balancer, and an optional WAFv2 web ACL with its request logs (encrypted log group,
API key redacted). The ALB itself belongs to the AWS Load Balancer Controller (it creates it from the
Ingress), so nothing here names it.

- DNS validation: https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html; the validation
  records are declared up front (one per name, known at program time) and fed the values ACM computes, never
  created inside ``apply``. ``CertificateValidation`` waits until ACM has issued the certificate, and its
  ``certificate_arn`` is what the Ingress uses, so the listener is only created with an issued certificate.
- Web ACL: regional scope (the only one ALBs take), AWS managed rule groups plus a per-IP rate limit.
  https://docs.aws.amazon.com/waf/latest/developerguide/aws-managed-rule-groups-baseline.html
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.resources.aws import dns_validation_field, fixed_name

w = aws.wafv2
VALIDATION_TTL_S = 300
SERVING_TTL_S = 60


@dataclass(frozen=True, kw_only=True)
class ServingCertificateArgs:
    """A public ACM certificate for ``domain``, validated through records in the Route 53 zone ``zone_id``."""

    domain: str
    zone_id: str


class ServingCertificate(pulumi.ComponentResource):
    """ACM certificate + its DNS validation record + the wait for issuance; ``certificate_arn`` is issued."""

    certificate_arn: pulumi.Output[str]

    def __init__(self, name: str, args: ServingCertificateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:serving:ServingCertificate", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.certificate = aws.acm.Certificate(
            f"{name}-certificate",
            domain_name=args.domain,
            validation_method="DNS",
            # a replaced certificate is created (and the Ingress moved to it) before the old one is deleted
            opts=child,
        )

        def option(field_name: str) -> pulumi.Output[str]:
            return dns_validation_field(self.certificate, args.domain, field_name)

        self.validation_record = aws.route53.Record(
            f"{name}-validation-record",
            zone_id=args.zone_id,
            name=option("resource_record_name"),
            type=option("resource_record_type"),
            records=[option("resource_record_value")],
            ttl=VALIDATION_TTL_S,
            # ACM reuses one validation name per domain and account: a second stack (or a re-created
            # certificate) for the same domain writes the same record
            allow_overwrite=True,
            opts=child,
        )
        self.validation = aws.acm.CertificateValidation(
            f"{name}-validation",
            certificate_arn=self.certificate.arn,
            validation_record_fqdns=[self.validation_record.fqdn],
            opts=child,
        )
        self.certificate_arn = self.validation.certificate_arn
        self.register_outputs({"certificate_arn": self.certificate_arn})


@dataclass(frozen=True, kw_only=True)
class ServingDnsRecordArgs:
    """``domain`` in the zone ``zone_id`` as a CNAME to ``target`` (the load balancer's DNS name)."""

    domain: str
    zone_id: str
    target: pulumi.Input[str]


class ServingDnsRecord(pulumi.ComponentResource):
    """The name clients use, pointing at the ALB the controller created (its DNS name, from the Ingress)."""

    fqdn: pulumi.Output[str]

    def __init__(self, name: str, args: ServingDnsRecordArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:serving:ServingDnsRecord", name, None, opts)
        self.record = aws.route53.Record(
            f"{name}-cname",
            zone_id=args.zone_id,
            name=args.domain,
            type="CNAME",
            records=[args.target],
            ttl=SERVING_TTL_S,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.fqdn = self.record.fqdn
        self.register_outputs({"fqdn": self.fqdn})


# AWS managed rule groups, in evaluation order after the rate limit: known bad sources first, then the
# core rule set, then bad inputs (Log4j, Java deserialization, localhost Host headers).
MANAGED_RULE_GROUPS = (
    "AWSManagedRulesAmazonIpReputationList",
    "AWSManagedRulesCommonRuleSet",
    "AWSManagedRulesKnownBadInputsRuleSet",
)
COUNT_OVERRIDES_GROUP = "AWSManagedRulesCommonRuleSet"
# Clients send their API key as `Authorization: Bearer <key>`: never in the WAF logs (lower case, as WAF
# requires of a header name in redacted fields).
REDACTED_HEADER = "authorization"


@dataclass(frozen=True, kw_only=True)
class InferenceWebAclArgs:
    """A regional web ACL: ``rate_limit`` requests per IP per 5 minutes, then the managed rule groups, with
    the core rule set's ``count_rules`` only counted."""

    name: str
    metric_prefix: str
    rate_limit: int
    count_rules: Sequence[str] = field(default_factory=tuple)
    # request logs: a CloudWatch Logs group (name must start aws-waf-logs-) under the logs key
    log_group_name: str | None = None
    log_retention_days: int = 365
    log_key_arn: pulumi.Input[str] | None = None


def _visibility(metric: str) -> w.WebAclRuleVisibilityConfigArgs:
    return w.WebAclRuleVisibilityConfigArgs(
        cloudwatch_metrics_enabled=True, metric_name=metric, sampled_requests_enabled=True
    )


class InferenceWebAcl(pulumi.ComponentResource):
    """The web ACL the Ingress attaches (``alb.ingress.kubernetes.io/wafv2-acl-arn``)."""

    arn: pulumi.Output[str]

    def __init__(self, name: str, args: InferenceWebAclArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:serving:InferenceWebAcl", name, None, opts)
        rules = [
            w.WebAclRuleArgs(
                name="rate-limit-per-ip",
                priority=0,
                action=w.WebAclRuleActionArgs(block=w.WebAclRuleActionBlockArgs()),
                statement=w.WebAclRuleStatementArgs(
                    rate_based_statement=w.WebAclRuleStatementRateBasedStatementArgs(
                        aggregate_key_type="IP", limit=args.rate_limit, evaluation_window_sec=300
                    )
                ),
                visibility_config=_visibility(f"{args.metric_prefix}-rate-limit"),
            )
        ]
        for priority, group in enumerate(MANAGED_RULE_GROUPS, start=1):
            overrides = (
                [
                    w.WebAclRuleStatementManagedRuleGroupStatementRuleActionOverrideArgs(
                        name=rule,
                        action_to_use=w.WebAclRuleStatementManagedRuleGroupStatementRuleActionOverrideActionToUseArgs(
                            count=w.WebAclRuleStatementManagedRuleGroupStatementRuleActionOverrideActionToUseCountArgs()
                        ),
                    )
                    for rule in args.count_rules
                ]
                if group == COUNT_OVERRIDES_GROUP and args.count_rules
                else None
            )
            rules.append(
                w.WebAclRuleArgs(
                    name=group,
                    priority=priority,
                    # the group's own actions apply (block), except the overridden rules
                    override_action=w.WebAclRuleOverrideActionArgs(none=w.WebAclRuleOverrideActionNoneArgs()),
                    statement=w.WebAclRuleStatementArgs(
                        managed_rule_group_statement=w.WebAclRuleStatementManagedRuleGroupStatementArgs(
                            name=group, vendor_name="AWS", rule_action_overrides=overrides
                        )
                    ),
                    visibility_config=_visibility(f"{args.metric_prefix}-{group}"),
                )
            )
        self.web_acl = w.WebAcl(
            f"{name}-acl",
            name=args.name,
            scope="REGIONAL",
            description="inference ALB: per-IP rate limit and AWS managed rule groups",
            default_action=w.WebAclDefaultActionArgs(allow=w.WebAclDefaultActionAllowArgs()),
            rules=rules,
            visibility_config=w.WebAclVisibilityConfigArgs(
                cloudwatch_metrics_enabled=True, metric_name=args.metric_prefix, sampled_requests_enabled=True
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.arn = self.web_acl.arn
        self.log_group: aws.cloudwatch.LogGroup | None = None
        if args.log_group_name is not None:
            self._logging(name, args)
        self.register_outputs({"arn": self.arn})

    def _logging(self, name: str, args: InferenceWebAclArgs) -> None:
        """Every request the web ACL sees, to an encrypted log group; the Authorization header (the API
        key) is redacted. AWS adds the log group's resource policy for the log delivery service itself
        (the deployer needs logs:PutResourcePolicy).
        https://docs.aws.amazon.com/waf/latest/developerguide/logging-cw-logs.html"""
        self.log_group = aws.cloudwatch.LogGroup(
            f"{name}-logs",
            name=args.log_group_name,
            retention_in_days=args.log_retention_days,
            kms_key_id=args.log_key_arn,
            opts=fixed_name(pulumi.ResourceOptions(parent=self)),
        )
        self.logging = w.WebAclLoggingConfiguration(
            f"{name}-logging",
            resource_arn=self.web_acl.arn,
            log_destination_configs=[self.log_group.arn],
            redacted_fields=[
                w.WebAclLoggingConfigurationRedactedFieldArgs(
                    single_header=w.WebAclLoggingConfigurationRedactedFieldSingleHeaderArgs(
                        name=REDACTED_HEADER
                    )
                )
            ],
            opts=pulumi.ResourceOptions(parent=self),
        )
