"""Fetch the AWS facts the rules need through the AWS provider's data sources.

This is the only place the program asks AWS questions. The calls are synchronous invokes, so the answers
are plain values available before any cloud resource is declared. Under ``aiplat plan`` the same calls are
answered by the mocks from the AWS snapshot (``infra/plan/mocks.py``).
"""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from infra.core.facts import AccountFacts, AvailabilityZone, InstanceFacts, RegionFacts
from infra.core.instance_types import GPU_FAMILY_PATTERNS
from infra.karpenter.gpu_offers import karpenter_patterns
from infra.schema.platform import PlatformConfig

GET_INSTANCE_TYPE = "aws:ec2/getInstanceType:getInstanceType"
ZONE_TYPE = "availability-zone"
# Under ``pulumi up`` the provider answers with what AWS says now.
LIVE_SOURCE = "AWS, as the provider's data sources answered in this run"


def instance_facts(instance_type: str, region: str, opts: pulumi.InvokeOptions) -> InstanceFacts:
    """``getInstanceType`` for one type, read through the one mapping in ``InstanceFacts``.

    The untyped invoke returns the provider's camelCase answer, which is the shape the offline snapshot is
    converted to as well; the typed ``aws.ec2.get_instance_type`` would need a second mapping.
    """
    result = pulumi.runtime.invoke(GET_INSTANCE_TYPE, {"instanceType": instance_type, "region": region}, opts)
    return InstanceFacts.from_get_instance_type(result.value)


def account_facts(provider: aws.Provider) -> AccountFacts:
    opts = pulumi.InvokeOptions(provider=provider)
    identity = aws.get_caller_identity(opts=opts)
    partition = aws.get_partition(opts=opts)
    return AccountFacts(identity.account_id, partition.partition)


def _gpu_suggestions(
    cfg: PlatformConfig, region_types: frozenset[str], opts: pulumi.InvokeOptions
) -> dict[str, InstanceFacts]:
    """Facts of the region's types in the GPU families (``GPU_FAMILY_PATTERNS``), those with GPUs: what a
    GPU pool whose type is not offered is offered instead. DescribeInstanceTypes has no GPU filter, so the
    name patterns narrow the question and each type's facts decide."""
    names = aws.ec2.get_instance_types(
        filters=[aws.ec2.GetInstanceTypesFilterArgs(name="instance-type", values=list(GPU_FAMILY_PATTERNS))],
        region=cfg.region,
        opts=opts,
    ).instance_types
    facts = (instance_facts(t, cfg.region, opts) for t in sorted(set(names) & region_types))
    return {f.instance_type: f for f in facts if f.has_gpus}


def gather_facts(cfg: PlatformConfig, provider: aws.Provider, *, source: str = LIVE_SOURCE) -> RegionFacts:
    """Ask AWS (or the offline data) about the region, every instance type the config names and every
    type of the Karpenter pools' families offered in the region's zones. ``source`` names what answers
    (the offline plan passes its data's label), for the messages of refusals on these facts."""
    opts = pulumi.InvokeOptions(provider=provider)
    # Ordinary availability zones only. DescribeAvailabilityZones also returns the Local and Wavelength
    # Zones the account has opted into ("us-west-2-lax-1a" sorts before "us-west-2a"); a VPC spread over
    # them would put EKS control-plane subnets where CreateCluster refuses them.
    # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeAvailabilityZones.html
    zones_result = aws.get_availability_zones(
        state="available",
        filters=[aws.GetAvailabilityZonesFilterArgs(name="zone-type", values=[ZONE_TYPE])],
        region=cfg.region,
        opts=opts,
    )
    zones = tuple(
        AvailabilityZone(name, zone_id, ZONE_TYPE)
        for name, zone_id in zip(zones_result.names, zones_result.zone_ids, strict=True)
    )
    types = sorted({p.instance_type for p in cfg.node_pools.values()})
    offerings: dict[str, set[str]] = {z.name: set() for z in zones}
    instances: dict[str, InstanceFacts] = {}
    region_types: frozenset[str] = frozenset()
    suggestions: dict[str, InstanceFacts] = {}
    if types:
        found = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone",
            filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=types)],
            region=cfg.region,
            opts=opts,
        )
        for itype, az in zip(found.instance_types, found.locations, strict=True):
            offerings.setdefault(az, set()).add(itype)
        offered = {t for ts in offerings.values() for t in ts}
        if offered != set(types):
            # Something named is not offered: fetch the region's list so the error can suggest one.
            everything = aws.ec2.get_instance_type_offerings(
                location_type="region", region=cfg.region, opts=opts
            )
            region_types = frozenset(everything.instance_types)
            if any(p.gpu and p.instance_type not in offered for p in cfg.node_pools.values()):
                suggestions = _gpu_suggestions(cfg, region_types, opts)
        for itype in types:
            if itype in offered:
                instances[itype] = instance_facts(itype, cfg.region, opts)
    patterns = karpenter_patterns(cfg)
    if patterns:
        # Karpenter pools name families. DescribeInstanceTypes documents wildcards for its instance-type
        # filter ("c5*"), so it expands the families ("g5.*") into types; their offerings per zone are then
        # asked by exact name (preflight does the same with boto3). Their facts (GPUs, architecture)
        # decide what fits.
        # https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html
        family_types = aws.ec2.get_instance_types(
            filters=[aws.ec2.GetInstanceTypesFilterArgs(name="instance-type", values=patterns)],
            region=cfg.region,
            opts=opts,
        ).instance_types
        found = aws.ec2.get_instance_type_offerings(
            location_type="availability-zone",
            filters=[
                aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=sorted(family_types))
            ],
            region=cfg.region,
            opts=opts,
        )
        for itype, az in zip(found.instance_types, found.locations, strict=True):
            offerings.setdefault(az, set()).add(itype)
        for itype in sorted(set(found.instance_types) - set(instances)):
            instances[itype] = instance_facts(itype, cfg.region, opts)
    # S3's ranges in the region, as the gateway endpoint's route has them: pods reach S3 at these addresses,
    # and a NetworkPolicy ipBlock cannot name the prefix list itself.
    # https://docs.aws.amazon.com/vpc/latest/userguide/working-with-aws-managed-prefix-lists.html
    s3_cidrs = aws.ec2.get_prefix_list(name=f"com.amazonaws.{cfg.region}.s3", region=cfg.region, opts=opts)
    return RegionFacts(
        region=cfg.region,
        zones=zones,
        s3_prefix_list_cidrs=tuple(s3_cidrs.cidr_blocks),
        offerings={az: frozenset(ts) for az, ts in offerings.items()},
        instances=instances,
        region_types=region_types,
        source=source,
        suggestions=suggestions,
    )
