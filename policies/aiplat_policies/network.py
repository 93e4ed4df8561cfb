"""Network: no ingress open to the world, VPC flow logs, log retention."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from infra.core.config import check_log_retention
from infra.network import cidrs
from infra.network.dns import ASSOCIATION_PRIORITY, EVERYTHING
from infra.network.documents.iam import ENDPOINT_ACCOUNT_KEYS

from .aws import SECURITY_GROUP, linked
from .core import (
    CRITICAL,
    HIGH,
    LOW,
    MEDIUM,
    UNKNOWN,
    Ctx,
    Res,
    Stack,
    Violation,
    as_list,
    number,
    resource_rule,
    stack_rule,
    violation,
)

INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SG_TYPES = (SECURITY_GROUP, INGRESS_RULE, SG_RULE)
ALL_PROTOCOLS = ("-1", "all")


@dataclass(frozen=True)
class Ingress:
    """One ingress permission: protocol, port range (None = all ports), CIDR sources."""

    protocol: Any
    from_port: Any
    to_port: Any
    cidrs: tuple[Any, ...]

    def all_ports(self) -> bool:
        return str(self.protocol).lower() in ALL_PROTOCOLS or self.from_port is None

    def covers(self, port: int) -> bool:
        if self.all_ports():
            return True
        if self.from_port is UNKNOWN or self.to_port is UNKNOWN:
            return True
        return (
            isinstance(self.from_port, float)
            and isinstance(self.to_port, float)
            and self.from_port <= port <= self.to_port
        )

    def ports(self) -> str:
        return "all ports" if self.all_ports() else f"ports {self.from_port:g}-{self.to_port:g}"


def ingress_of(r: Res) -> list[Ingress]:
    """The ingress permissions a security group resource (or a rule resource) grants."""
    if r.type == SECURITY_GROUP:
        return [
            Ingress(
                i.get("protocol"),
                number(i.get("fromPort")),
                number(i.get("toPort")),
                tuple(as_list(i.get("cidrBlocks")) + as_list(i.get("ipv6CidrBlocks"))),
            )
            for i in as_list(r.get("ingress"))
            if isinstance(i, dict)
        ]
    if r.type == INGRESS_RULE:
        sources = tuple(c for c in (r.get("cidrIpv4"), r.get("cidrIpv6")) if c is not None)
        return [Ingress(r.get("ipProtocol"), number(r.get("fromPort")), number(r.get("toPort")), sources)]
    if r.type == SG_RULE and r.get("type") == "ingress":
        sources = tuple(as_list(r.get("cidrBlocks")) + as_list(r.get("ipv6CidrBlocks")))
        return [Ingress(r.get("protocol"), number(r.get("fromPort")), number(r.get("toPort")), sources)]
    return []


@resource_rule(
    "no-world-open-ingress",
    description="No security group accepts traffic from the whole internet (0.0.0.0/0, ::/0), except on "
    "the ports load balancers serve (config allowedPorts, default 80 and 443).",
    severity=CRITICAL,
    doc="https://docs.aws.amazon.com/vpc/latest/userguide/security-group-rules.html",
    types=SG_TYPES,
    unknowns="An unknown CIDR counts as open to the world; unknown ports count as all ports.",
    config={
        "allowedPorts": {
            "type": "array",
            "items": {"type": "number"},
            "default": [80, 443],
            "description": "Ports a world-open rule may cover (an internet-facing load balancer's "
            "listeners).",
        }
    },
)
def no_world_open_ingress(r: Res, ctx: Ctx) -> Iterator[Violation]:
    allowed = [float(p) for p in ctx.config["allowedPorts"]]
    for rule in ingress_of(r):
        world = [c for c in rule.cidrs if c is UNKNOWN or (isinstance(c, str) and cidrs.is_world(c))]
        if not world:
            continue
        only_allowed = (
            not rule.all_ports()
            and isinstance(rule.from_port, float)
            and rule.from_port == rule.to_port
            and rule.from_port in allowed
        )
        if only_allowed:
            continue
        what = rule.ports()
        if rule.covers(22):
            what = "SSH (port 22)" if rule.from_port == rule.to_port == 22 else f"{what}, SSH included"
        yield violation(
            f"ingress on {what} (protocol {rule.protocol}) from {[str(c) for c in world]}",
            "allow only the CIDRs or security groups that need it; reach nodes through SSM Session Manager, "
            "not SSH",
        )


VPC = "aws:ec2/vpc:Vpc"
FLOW_LOG = "aws:ec2/flowLog:FlowLog"


@stack_rule(
    "vpc-flow-logs",
    description="Every VPC records flow logs to a destination.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs.html",
    unknowns="Flow logs are tied to their VPC by property dependency (the VPC id is unknown at preview); "
    "an unknown destination counts as set (it is a log group or bucket of this update).",
)
def vpc_flow_logs(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    vpcs = stack.of_type(VPC)
    covered = set()
    for log in stack.of_type(FLOW_LOG):
        destination = log.get("logDestination") or log.get("logGroupName")
        if destination is None:
            continue
        for vpc in linked(log, "vpcId", vpcs):
            covered.add(vpc.urn)
    for vpc in vpcs:
        if vpc.urn not in covered:
            yield violation(
                f"VPC {vpc.name!r} has no flow log",
                "add an aws.ec2.FlowLog for the VPC (traffic_type ALL, a CloudWatch log group under the "
                "logs key)",
                vpc.urn,
            )


@resource_rule(
    "log-group-retention",
    description="Log groups keep records for a bounded period that CloudWatch accepts, at least the "
    "configured minimum (never-expire groups grow without bound).",
    severity=LOW,
    doc="https://docs.aws.amazon.com/AmazonCloudWatchLogs/latest/APIReference/API_PutRetentionPolicy.html",
    types=("aws:cloudwatch/logGroup:LogGroup",),
    unknowns="An unknown retention is a violation (it is a literal).",
    config={
        "minDays": {
            "type": "number",
            "default": 14,
            "description": "Shortest retention accepted (days).",
        }
    },
)
def log_group_retention(r: Res, ctx: Ctx) -> Iterator[Violation]:
    days = number(r.get("retentionInDays"))
    if days is None or days == 0:
        yield violation("retention is 'never expire'", "set retention_in_days, e.g. 90")
        return
    if days is UNKNOWN:
        yield violation("retention is unknown at preview", "set retention_in_days as a literal")
        return
    try:
        check_log_retention(int(days))  # the plan's own check: CloudWatch's accepted values
    except ValueError as exc:
        yield violation(f"retention_in_days {exc}", "use a value CloudWatch accepts")
        return
    if days < ctx.config["minDays"]:
        yield violation(
            f"retention {days:g} days is shorter than {ctx.config['minDays']:g}",
            f"set retention_in_days to at least {ctx.config['minDays']:g}",
        )


VPC_ENDPOINT = "aws:ec2/vpcEndpoint:VpcEndpoint"


def _account_keys(statement: dict[str, Any]) -> set[str]:
    condition = statement.get("Condition")
    if not isinstance(condition, dict):
        return set()
    keys = {k for block in condition.values() if isinstance(block, dict) for k in block}
    return keys & set(ENDPOINT_ACCOUNT_KEYS)


@resource_rule(
    "interface-endpoint-account-policy",
    description="Every interface VPC endpoint has a policy whose every Allow names our account "
    f"({', '.join(ENDPOINT_ACCOUNT_KEYS)}): without one the endpoint serves any principal of any account, "
    "and code holding another account's keys sends our data out through it.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-access.html",
    types=(VPC_ENDPOINT,),
    unknowns="An unknown policy is a violation (it is built from literals).",
)
def interface_endpoint_account_policy(r: Res, ctx: Ctx) -> Iterator[Violation]:
    if r.get("vpcEndpointType") != "Interface":
        return
    fix = "set policy to infra/network/documents/iam.py interface_endpoint_policy(...)"
    document = r.get("policy")
    if document is None or document is UNKNOWN:
        yield violation(
            f"interface endpoint {r.get('serviceName')} has no policy (AWS's default: full access)", fix
        )
        return
    try:
        statements = as_list(json.loads(document).get("Statement")) if isinstance(document, str) else []
    except (ValueError, AttributeError):
        statements = []
    if not statements:
        yield violation(f"interface endpoint {r.get('serviceName')}: policy has no statement", fix)
    for st in statements:
        if isinstance(st, dict) and st.get("Effect") == "Allow" and not _account_keys(st):
            yield violation(
                f"interface endpoint {r.get('serviceName')}: statement {st.get('Sid', '(no Sid)')!r} allows "
                f"without any of {list(ENDPOINT_ACCOUNT_KEYS)}",
                fix,
            )


FW_ASSOCIATION = "aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation"
FW_GROUP = "aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup"
FW_RULE = "aws:route53/resolverFirewallRule:ResolverFirewallRule"
FW_LIST = "aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList"


@stack_rule(
    "vpc-dns-firewall",
    description="Every VPC has a Route 53 Resolver DNS Firewall rule group associated whose last word is to "
    f"block every other name (a '{EVERYTHING}' domain list, action BLOCK), with an association priority AWS "
    f"accepts ({ASSOCIATION_PRIORITY[0]}-{ASSOCIATION_PRIORITY[1]}): code in a pod cannot carry a token out "
    "in a DNS query.",
    severity=HIGH,
    doc="https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/resolver-dns-firewall.html",
    unknowns="Resources are tied by property dependency (ids are unknown at preview); an unknown action or "
    "domain list counts as not blocking.",
)
def vpc_dns_firewall(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    fix = "set network.dns_firewall.mode: block (infra/network/component.py _dns_firewall)"
    lists = stack.of_type(FW_LIST)
    rules = stack.of_type(FW_RULE)
    for vpc in stack.of_type(VPC):
        associations = [a for a in stack.of_type(FW_ASSOCIATION) if vpc in linked(a, "vpcId", [vpc])]
        if not associations:
            yield violation(f"VPC {vpc.name!r} has no DNS Firewall rule group", fix, vpc.urn)
            continue
        blocking = False
        for association in associations:
            low, high = ASSOCIATION_PRIORITY
            priority = number(association.get("priority"))
            if not (isinstance(priority, float) and low <= priority <= high):
                shown = format(priority, "g") if isinstance(priority, float) else priority
                yield violation(
                    f"association priority {shown} is outside {low}-{high}",
                    f"use a priority from {low} to {high}",
                    association.urn,
                )
            for group in linked(association, "firewallRuleGroupId", stack.of_type(FW_GROUP)):
                for rule in rules:
                    if group not in linked(rule, "firewallRuleGroupId", [group]):
                        continue
                    everything = any(
                        EVERYTHING in as_list(lst.get("domains"))
                        for lst in linked(rule, "firewallDomainListId", lists)
                    )
                    blocking |= everything and rule.get("action") == "BLOCK"
        if not blocking:
            yield violation(
                f"VPC {vpc.name!r}: no DNS Firewall rule blocks the names not allowed", fix, vpc.urn
            )
