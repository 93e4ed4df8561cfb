"""The AWS side of the global endpoint in one region: the ACM certificate for the global name (its DNS
validation record declared by one stack only), the region's drain switch and its latency alias record.

- Certificate: ACM certificates are regional, so each region requests its own; ACM asks every one of them
  for the same validation CNAME (the record is derived from the domain and the account), so exactly one
  stack (``validation_record_owner``) declares it and the other's ``CertificateValidation`` only waits for
  ACM to see it. https://docs.aws.amazon.com/acm/latest/userguide/dns-validation.html
- Record: ``A`` alias to the region's ALB with ``EvaluateTargetHealth``, latency routing by region
  (``SetIdentifier`` = region), and the drain switch as its health check (``infra/edge/documents.py``).
  https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/routing-policy-latency.html
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from infra.edge import documents as edge
from infra.resources.aws import dns_validation_field

VALIDATION_TTL_S = 300


@dataclass(frozen=True, kw_only=True)
class GlobalCertificateArgs:
    """A public ACM certificate for the global ``name`` in this region; ``declare_validation_record``: this
    stack owns the (shared) validation record in the zone ``zone_id``."""

    name: str
    zone_id: str
    declare_validation_record: bool


class GlobalCertificate(pulumi.ComponentResource):
    """ACM certificate for the global name + (owner only) its validation record + the wait for issuance."""

    certificate_arn: pulumi.Output[str]

    def __init__(self, name: str, args: GlobalCertificateArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:edge:GlobalCertificate", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.certificate = aws.acm.Certificate(
            f"{name}-certificate", domain_name=args.name, validation_method="DNS", opts=child
        )
        self.validation_record: aws.route53.Record | None = None
        fqdns: list[pulumi.Input[str]] | None = None
        if args.declare_validation_record:

            def option(field_name: str) -> pulumi.Output[str]:
                return dns_validation_field(self.certificate, args.name, field_name)

            # no allow_overwrite: this stack is the record's one owner (rule global-endpoint-agreement)
            self.validation_record = aws.route53.Record(
                f"{name}-validation-record",
                zone_id=args.zone_id,
                name=option("resource_record_name"),
                type=option("resource_record_type"),
                records=[option("resource_record_value")],
                ttl=VALIDATION_TTL_S,
                opts=child,
            )
            fqdns = [self.validation_record.fqdn]
        # Without fqdns: waits until ACM has issued the certificate, which it does once it sees the
        # owner stack's record (the same CNAME).
        self.validation = aws.acm.CertificateValidation(
            f"{name}-validation",
            certificate_arn=self.certificate.arn,
            validation_record_fqdns=fqdns,
            opts=child,
        )
        self.certificate_arn = self.validation.certificate_arn
        self.register_outputs({"certificate_arn": self.certificate_arn})


@dataclass(frozen=True, kw_only=True)
class GlobalRecordArgs:
    """This region's entry of the global ``name`` in zone ``zone_id``: an alias to the ALB
    ``load_balancer_hostname`` (in the ELB zone ``load_balancer_zone_id``) for resolvers nearest
    ``region``."""

    name: str
    zone_id: str
    region: str
    load_balancer_hostname: pulumi.Input[str]
    load_balancer_zone_id: pulumi.Input[str]
    tags: Mapping[str, str] = field(default_factory=dict)


class GlobalRecord(pulumi.ComponentResource):
    """The region's drain switch (a Route 53 health check) and its latency alias record."""

    drain_switch_id: pulumi.Output[str]
    fqdn: pulumi.Output[str]

    def __init__(self, name: str, args: GlobalRecordArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:edge:GlobalRecord", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Named "-serving-switch", not the earlier "-drain-switch" (threshold 0, not inverted): a new check,
        # created inverted (serving), replaces it; changing the old one's threshold in place while `pulumi up`
        # ignores its Inverted flag would have drained the region.
        self.drain_switch = aws.route53.HealthCheck(
            f"{name}-serving-switch",
            type=edge.DRAIN_CHECK_TYPE,
            child_health_threshold=edge.DRAIN_HEALTH_THRESHOLD,
            child_healthchecks=[],
            invert_healthcheck=edge.SERVING_INVERTED,
            tags={**args.tags, "Name": f"{args.name} {args.region} drain switch"},
            # aiplat rollout owns the inversion (drain/undrain around a wave): an up in mid-wave must not
            # put the region back before its health gate passed
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=[edge.DRAIN_PROPERTY]),
        )
        self.record = aws.route53.Record(
            f"{name}-latency",
            zone_id=args.zone_id,
            name=args.name,
            type=edge.RECORD_TYPE,
            set_identifier=edge.set_identifier(args.region),
            latency_routing_policies=[aws.route53.RecordLatencyRoutingPolicyArgs(region=args.region)],
            aliases=[
                aws.route53.RecordAliasArgs(
                    name=args.load_balancer_hostname,
                    zone_id=args.load_balancer_zone_id,
                    evaluate_target_health=True,
                )
            ],
            health_check_id=self.drain_switch.id,
            opts=child,
        )
        self.drain_switch_id = self.drain_switch.id
        self.fqdn = self.record.fqdn
        self.register_outputs({"drain_switch_id": self.drain_switch_id, "fqdn": self.fqdn})
