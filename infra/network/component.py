"""GpuVpc: the stack's VPC with public and private subnets, NAT, VPC endpoints and flow logs."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.core import iam
from infra.network import dns
from infra.network.documents import cidr
from infra.network.documents import iam as network_iam
from infra.resources.aws import fixed_name


@dataclass(frozen=True, kw_only=True)
class FlowLogs:
    """VPC flow logs into a CloudWatch log group (name, retention in days, traffic, interval in seconds)."""

    log_group_name: str
    retention_days: int = 90
    traffic_type: str = "ALL"
    aggregation_interval_s: int = 600


@dataclass(frozen=True, kw_only=True)
class DnsFirewall:
    """Route 53 Resolver DNS Firewall on the VPC: ``domains`` resolve (``infra/network/dns.py``), every other
    name gets ``action`` (``BLOCK``: NXDOMAIN, or ``ALERT``: resolved and logged)."""

    domains: tuple[str, ...]
    action: str = "BLOCK"


@dataclass(frozen=True, kw_only=True)
class GpuVpcArgs:
    """Inputs of GpuVpc.

    ``name_tag_prefix`` starts every ``Name`` tag; ``cluster_name`` goes into the subnet tags the AWS Load
    Balancer Controller looks for; ``nat_zones`` are the zones that get a NAT gateway (empty: none; the
    private route tables of other zones use the first one); ``flow_logs`` None turns them off;
    ``logs_key_arn`` encrypts the flow-log group (from KmsKeys, never created here).
    """

    name_tag_prefix: str
    cidr: str
    availability_zones: tuple[str, ...]
    region: str
    cluster_name: str
    nat_zones: tuple[str, ...] = ()
    interface_endpoints: tuple[str, ...] = ()
    flow_logs: FlowLogs | None = None
    # None: no DNS firewall (the VPC resolves any name)
    dns_firewall: DnsFirewall | None = None
    logs_key_arn: pulumi.Input[str] | None = None
    # JSON policy of the S3 gateway endpoint (None: full access, the AWS default)
    s3_endpoint_policy: pulumi.Input[str] | None = None
    # the account of the interface endpoints' policies and the flow logs role's confused-deputy conditions
    account_id: str
    partition: str = "aws"


class GpuVpc(pulumi.ComponentResource):
    """A VPC for a private GPU cluster.

    One private and one public subnet per AZ (layout in ``infra/network/documents/cidr.py``); NAT gateways per
    ``nat``; an S3 gateway endpoint on every private route table (training data and checkpoints never
    cross a NAT gateway, https://docs.aws.amazon.com/vpc/latest/privatelink/vpc-endpoints-s3.html);
    interface endpoints for what nodes call at boot, in subnets of their own and each with a policy that
    admits only our account; a DNS firewall; flow logs to an encrypted log group.
    """

    vpc_id: pulumi.Output[str]
    private_subnet_ids: dict[str, pulumi.Output[str]]
    public_subnet_ids: dict[str, pulumi.Output[str]]
    private_route_table_ids: dict[str, pulumi.Output[str]]
    public_route_table_id: pulumi.Output[str]
    endpoint_security_group_id: pulumi.Output[str]
    s3_endpoint_id: pulumi.Output[str]

    def __init__(self, name: str, args: GpuVpcArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("aiplat:network:GpuVpc", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        p = args.name_tag_prefix
        layout = cidr.plan_subnets(args.cidr, args.availability_zones)

        self.vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.cidr,
            enable_dns_support=True,
            enable_dns_hostnames=True,  # EKS private endpoints and interface endpoints need DNS hostnames
            tags={"Name": f"{p}-vpc"},
            opts=child,
        )
        self.vpc_id = self.vpc.id
        # The default security group, adopted with no rules: nothing can use it by accident (resources
        # launched without a group land in it).
        # https://docs.aws.amazon.com/vpc/latest/userguide/default-security-group.html
        aws.ec2.DefaultSecurityGroup(
            f"{name}-default-sg", vpc_id=self.vpc.id, tags={"Name": f"{p}-default-unused"}, opts=child
        )
        # https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html#network-requirements-subnets
        # (the elb / internal-elb role tags are what the AWS Load Balancer Controller discovers subnets by)
        cluster_tag = {f"kubernetes.io/cluster/{args.cluster_name}": "shared"}
        self.subnets: dict[tuple[str, str], aws.ec2.Subnet] = {}
        role_tags = {
            cidr.Tier.private: {"kubernetes.io/role/internal-elb": "1", **cluster_tag},
            cidr.Tier.public: {"kubernetes.io/role/elb": "1", **cluster_tag},
            # the interface endpoints alone: no load balancer or node (Karpenter selects by the private
            # subnets' tags) is placed there
            cidr.Tier.endpoints: {},
        }
        for s in layout:
            self.subnets[(s.tier.value, s.availability_zone)] = aws.ec2.Subnet(
                f"{name}-{s.tier.value}-{s.availability_zone}",
                vpc_id=self.vpc.id,
                cidr_block=s.cidr,
                availability_zone=s.availability_zone,
                map_public_ip_on_launch=False,  # no implicit public IPs, not even in public subnets
                tags={"Name": f"{p}-{s.tier.value}-{s.availability_zone}", **role_tags[s.tier]},
                opts=child,
            )
        self.private_subnet_ids = {az: self.subnets[("private", az)].id for az in args.availability_zones}
        self.public_subnet_ids = {az: self.subnets[("public", az)].id for az in args.availability_zones}

        # Public side: one route table to the internet gateway.
        self.igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=self.vpc.id, tags={"Name": f"{p}-igw"}, opts=child
        )
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-rt",
            vpc_id=self.vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=self.igw.id)],
            tags={"Name": f"{p}-public"},
            opts=child,
        )
        self.public_route_table_id = public_rt.id
        for az in args.availability_zones:
            aws.ec2.RouteTableAssociation(
                f"{name}-public-rta-{az}",
                subnet_id=self.public_subnet_ids[az],
                route_table_id=public_rt.id,
                opts=child,
            )

        # NAT gateways per strategy; a private route table per AZ either way (gateway endpoints use them).
        unknown = [az for az in args.nat_zones if az not in args.availability_zones]
        if unknown:
            raise ValueError(f"NAT zones {unknown} are not zones of the VPC {list(args.availability_zones)}")
        nat_azs = args.nat_zones
        nats: dict[str, aws.ec2.NatGateway] = {}
        for az in nat_azs:
            eip = aws.ec2.Eip(
                f"{name}-nat-eip-{az}", domain="vpc", tags={"Name": f"{p}-nat-{az}"}, opts=child
            )
            nats[az] = aws.ec2.NatGateway(
                f"{name}-nat-{az}",
                allocation_id=eip.id,
                subnet_id=self.public_subnet_ids[az],
                tags={"Name": f"{p}-nat-{az}"},
                opts=pulumi.ResourceOptions(parent=self, depends_on=[self.igw]),
            )
        self.private_route_table_ids: dict[str, pulumi.Output[str]] = {}
        for az in args.availability_zones:
            nat = nats.get(az) or (nats[nat_azs[0]] if nat_azs else None)
            routes = (
                [aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", nat_gateway_id=nat.id)] if nat else []
            )
            rt = aws.ec2.RouteTable(
                f"{name}-private-rt-{az}",
                vpc_id=self.vpc.id,
                routes=routes,
                tags={"Name": f"{p}-private-{az}"},
                opts=child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-rta-{az}",
                subnet_id=self.private_subnet_ids[az],
                route_table_id=rt.id,
                opts=child,
            )
            self.private_route_table_ids[az] = rt.id

        # Gateway endpoint for S3 on every private route table.
        self.s3_endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=self.vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=list(self.private_route_table_ids.values()),
            policy=args.s3_endpoint_policy,
            tags={"Name": f"{p}-s3"},
            opts=child,
        )
        self.s3_endpoint_id = self.s3_endpoint.id

        # Interface endpoints: HTTPS from inside the VPC only.
        self.endpoint_sg = aws.ec2.SecurityGroup(
            f"{name}-endpoints-sg",
            vpc_id=self.vpc.id,
            description="HTTPS from the VPC to interface endpoints",
            ingress=[
                aws.ec2.SecurityGroupIngressArgs(
                    protocol="tcp",
                    from_port=443,
                    to_port=443,
                    cidr_blocks=[args.cidr],
                    description="HTTPS from VPC",
                )
            ],
            tags={"Name": f"{p}-endpoints"},
            opts=child,
        )
        self.endpoint_security_group_id = self.endpoint_sg.id
        self.interface_endpoints: dict[str, aws.ec2.VpcEndpoint] = {}
        for svc in args.interface_endpoints:
            endpoint_policy = network_iam.interface_endpoint_policy(
                service=svc, account_id=args.account_id, region=args.region, partition=args.partition
            )
            self.interface_endpoints[svc] = aws.ec2.VpcEndpoint(
                f"{name}-{svc.replace('.', '-')}",
                vpc_id=self.vpc.id,
                service_name=f"com.amazonaws.{args.region}.{svc}",
                vpc_endpoint_type="Interface",
                private_dns_enabled=True,
                subnet_ids=[self.subnets[("endpoints", az)].id for az in args.availability_zones],
                security_group_ids=[self.endpoint_sg.id],
                # without a policy an endpoint admits any principal of any account (AWS's default)
                policy=json.dumps(endpoint_policy),
                tags={"Name": f"{p}-{svc}"},
                opts=child,
            )

        if args.flow_logs is not None:
            self._flow_logs(name, args, args.flow_logs)
        if args.dns_firewall is not None:
            self._dns_firewall(name, args, args.dns_firewall)

        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "private_subnet_ids": self.private_subnet_ids,
                "public_subnet_ids": self.public_subnet_ids,
                "private_route_table_ids": self.private_route_table_ids,
                "public_route_table_id": self.public_route_table_id,
                "endpoint_security_group_id": self.endpoint_security_group_id,
                "s3_endpoint_id": self.s3_endpoint_id,
            }
        )

    def _dns_firewall(self, name: str, args: GpuVpcArgs, fw: DnsFirewall) -> None:
        """An allow rule for ``fw.domains``, then a catch-all (``*``) with ``fw.action``, in one rule group
        associated with the VPC; closed when the firewall cannot answer (fail-open off).

        Redirections (CNAME chains) of an allowed name are trusted: the allowed name's owner chose them
        (a registry's CDN), not the querier.
        https://docs.aws.amazon.com/Route53/latest/DeveloperGuide/resolver-dns-firewall-rule-settings.html
        """
        child = pulumi.ResourceOptions(parent=self)
        p = args.name_tag_prefix
        for domain in fw.domains:
            problem = dns.domain_problem(domain)
            if problem:
                raise ValueError(f"DNS firewall domain {domain!r} {problem}")
        if len(fw.domains) > dns.DOMAINS_PER_LIST:
            raise ValueError(f"{len(fw.domains)} DNS firewall domains; one list holds {dns.DOMAINS_PER_LIST}")
        low, high = dns.ASSOCIATION_PRIORITY
        if not low <= dns.OUR_ASSOCIATION_PRIORITY <= high:
            raise ValueError(f"association priority {dns.OUR_ASSOCIATION_PRIORITY} is outside {low}-{high}")
        allowed = aws.route53.ResolverFirewallDomainList(
            f"{name}-dns-allowed",
            name=f"{p}-allowed"[:64],
            domains=list(fw.domains),
            tags={"Name": f"{p}-allowed"},
            opts=child,
        )
        everything = aws.route53.ResolverFirewallDomainList(
            f"{name}-dns-everything",
            name=f"{p}-everything"[:64],
            domains=[dns.EVERYTHING],
            tags={"Name": f"{p}-everything"},
            opts=child,
        )
        group = aws.route53.ResolverFirewallRuleGroup(
            f"{name}-dns-rules", name=f"{p}-dns"[:64], tags={"Name": f"{p}-dns"}, opts=child
        )
        aws.route53.ResolverFirewallRule(
            f"{name}-dns-allow",
            name="allow-needed",
            firewall_rule_group_id=group.id,
            firewall_domain_list_id=allowed.id,
            priority=dns.ALLOW_PRIORITY,
            action="ALLOW",
            firewall_domain_redirection_action="TRUST_REDIRECTION_DOMAIN",
            opts=child,
        )
        aws.route53.ResolverFirewallRule(
            f"{name}-dns-catch-all",
            name="everything-else",
            firewall_rule_group_id=group.id,
            firewall_domain_list_id=everything.id,
            priority=dns.CATCH_ALL_PRIORITY,
            action=fw.action,
            block_response="NXDOMAIN" if fw.action == "BLOCK" else None,
            opts=child,
        )
        self.dns_firewall_association = aws.route53.ResolverFirewallRuleGroupAssociation(
            f"{name}-dns-association",
            name=f"{p}-dns"[:64],
            firewall_rule_group_id=group.id,
            vpc_id=self.vpc.id,
            priority=dns.OUR_ASSOCIATION_PRIORITY,
            tags={"Name": f"{p}-dns"},
            opts=child,
        )
        # closed: when DNS Firewall cannot evaluate a query, it is not answered (AWS's default, said here)
        aws.route53.ResolverFirewallConfig(
            f"{name}-dns-config", resource_id=self.vpc.id, firewall_fail_open="DISABLED", opts=child
        )

    def _flow_logs(self, name: str, args: GpuVpcArgs, flow_logs: FlowLogs) -> None:
        """Flow logs to a CloudWatch log group under the logs key, delivered by a role scoped to that group.

        https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-cwl.html
        """
        child = pulumi.ResourceOptions(parent=self)
        self.flow_log_group = aws.cloudwatch.LogGroup(
            f"{name}-flow-logs",
            name=flow_logs.log_group_name,
            retention_in_days=flow_logs.retention_days,
            kms_key_id=args.logs_key_arn,
            opts=fixed_name(child),
        )
        role = aws.iam.Role(
            f"{name}-flow-logs-role",
            # Confused-deputy guard: only the flow logs of our account in this region.
            # https://docs.aws.amazon.com/vpc/latest/userguide/flow-logs-iam-role.html
            assume_role_policy=json.dumps(
                iam.service_trust_policy(
                    "vpc-flow-logs.amazonaws.com",
                    args.account_id,
                    source_arn=f"arn:{args.partition}:ec2:{args.region}:{args.account_id}:vpc-flow-log/*",
                )
            ),
            opts=child,
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-flow-logs-policy",
            role=role.id,
            policy=self.flow_log_group.arn.apply(
                lambda arn: json.dumps(network_iam.flow_logs_delivery_policy(arn))
            ),
            opts=child,
        )
        self.flow_log = aws.ec2.FlowLog(
            f"{name}-flow-log",
            vpc_id=self.vpc.id,
            traffic_type=flow_logs.traffic_type,
            log_destination_type="cloud-watch-logs",
            log_destination=self.flow_log_group.arn,
            iam_role_arn=role.arn,
            max_aggregation_interval=flow_logs.aggregation_interval_s,
            tags={"Name": f"{args.name_tag_prefix}-vpc"},
            # The role must be able to write before the service first delivers (it checks at creation).
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[role_policy])),
        )
