"""Cost-allocation tags on every taggable resource, counting the AWS provider's default tags."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from infra.schema.platform import Tags

from .aws import LAUNCH_TEMPLATE, default_tags
from .core import MEDIUM, UNKNOWN, Ctx, Res, Violation, as_list, dig, resource_rule, violation
from .nodes import EC2_NODE_CLASS

# The keys every stack file must set (the required fields of the config's Tags model).
REQUIRED_TAGS = [name for name, f in Tags.model_fields.items() if f.is_required()]

# AWS resource types that take tags (their pulumi-aws class has a 'tags' argument); a test keeps this in
# step with pulumi-aws for every type the plans contain.
TAGGABLE = frozenset(
    {
        "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup",
        "aws:ssm/document:Document",
        "aws:acm/certificate:Certificate",
        "aws:alb/listener:Listener",
        "aws:alb/loadBalancer:LoadBalancer",
        "aws:alb/targetGroup:TargetGroup",
        "aws:autoscaling/group:Group",
        "aws:cloudtrail/trail:Trail",
        "aws:cloudwatch/eventRule:EventRule",
        "aws:cloudwatch/logGroup:LogGroup",
        "aws:cloudwatch/metricAlarm:MetricAlarm",
        "aws:ebs/volume:Volume",
        "aws:ec2/capacityReservation:CapacityReservation",
        "aws:ec2/eip:Eip",
        "aws:ec2/flowLog:FlowLog",
        "aws:ec2/instance:Instance",
        "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/launchTemplate:LaunchTemplate",
        "aws:ec2/natGateway:NatGateway",
        "aws:ec2/networkInterface:NetworkInterface",
        "aws:ec2/placementGroup:PlacementGroup",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/securityGroup:SecurityGroup",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/vpc:Vpc",
        "aws:ec2/vpcEndpoint:VpcEndpoint",
        "aws:ecr/repository:Repository",
        "aws:efs/fileSystem:FileSystem",
        "aws:eks/accessEntry:AccessEntry",
        "aws:eks/addon:Addon",
        "aws:eks/cluster:Cluster",
        "aws:eks/nodeGroup:NodeGroup",
        "aws:eks/podIdentityAssociation:PodIdentityAssociation",
        "aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation",
        "aws:fsx/lustreFileSystem:LustreFileSystem",
        "aws:guardduty/detector:Detector",
        "aws:iam/instanceProfile:InstanceProfile",
        "aws:iam/openIdConnectProvider:OpenIdConnectProvider",
        "aws:iam/policy:Policy",
        "aws:iam/role:Role",
        "aws:kms/key:Key",
        "aws:kms/replicaKey:ReplicaKey",
        "aws:lb/listener:Listener",
        "aws:lb/loadBalancer:LoadBalancer",
        "aws:lb/targetGroup:TargetGroup",
        "aws:route53/healthCheck:HealthCheck",
        "aws:route53/zone:Zone",
        "aws:route53/resolverFirewallDomainList:ResolverFirewallDomainList",
        "aws:route53/resolverFirewallRuleGroup:ResolverFirewallRuleGroup",
        "aws:route53/resolverFirewallRuleGroupAssociation:ResolverFirewallRuleGroupAssociation",
        "aws:s3/bucket:Bucket",
        "aws:secretsmanager/secret:Secret",
        "aws:sns/topic:Topic",
        "aws:sqs/queue:Queue",
        "aws:ssm/parameter:Parameter",
        "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
        "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
        "aws:wafv2/webAcl:WebAcl",
    }
)
# What a node's launch template must tag: the instances and volumes it launches are billed, and the
# provider's default tags do not reach resources that EC2 Auto Scaling creates.
LAUNCHED = ("instance", "volume")


def _missing(keys: Any, required: list[str]) -> list[str]:
    if keys is UNKNOWN:
        return list(required)
    return [k for k in required if k not in keys]


@resource_rule(
    "required-cost-tags",
    description="Every taggable AWS resource carries the cost-allocation tag keys (config requiredTags), "
    "from its own tags, its tagsAll or its provider's default tags; launch templates and Karpenter "
    "EC2NodeClasses also tag the instances and volumes they launch.",
    severity=MEDIUM,
    doc="https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/cost-alloc-tags.html",
    types=(*sorted(TAGGABLE), EC2_NODE_CLASS),
    unknowns="Unknown tag values are fine (the keys count); an unknown tags map or default-tags block "
    "contributes no keys.",
    config={
        "requiredTags": {
            "type": "array",
            "items": {"type": "string"},
            "default": REQUIRED_TAGS,
            "description": "Tag keys every taggable resource must carry.",
        }
    },
)
def required_cost_tags(r: Res, ctx: Ctx) -> Iterator[Violation]:
    required = list(ctx.config["requiredTags"])
    if r.type == EC2_NODE_CLASS:
        # Karpenter tags the instances, volumes and interfaces it launches with the EC2NodeClass's spec.tags
        # only. https://karpenter.sh/docs/concepts/nodeclasses/#spectags
        tags = r.get("spec", "tags")
        lacking = _missing(tags if isinstance(tags, dict) else UNKNOWN if tags is UNKNOWN else {}, required)
        if lacking:
            yield violation(
                f"spec.tags lack {lacking}: the nodes Karpenter launches would carry no cost tags",
                "set spec.tags to the stack's tags (aiplat:platform.tags)",
            )
        return
    keys: set[str] = set()
    for source in (r.get("tags"), r.get("tagsAll"), default_tags(r)):
        if isinstance(source, dict):
            keys |= set(source)
    missing = _missing(keys, required)
    if missing:
        yield violation(
            f"tags {missing} are missing (resource tags and the provider's default tags give {sorted(keys)})",
            "set them in the provider's default_tags (the stack's aiplat:platform.tags) or on the resource",
        )
    if r.type == LAUNCH_TEMPLATE:
        specs = {dig(s, "resourceType"): dig(s, "tags") for s in as_list(r.get("tagSpecifications"))}
        for kind in LAUNCHED:
            tags = specs.get(kind)
            have = tags if isinstance(tags, dict) else {}
            lacking = _missing(have if tags is not UNKNOWN else UNKNOWN, required)
            if lacking:
                yield violation(
                    f"tag_specifications for {kind} lack {lacking}",
                    f"add a tag_specifications entry for '{kind}' with the stack's tags",
                )
