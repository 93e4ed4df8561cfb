"""Fetch the AWS facts the validation needs through the AWS provider's data sources.

This is the only place the program asks AWS questions. The calls are synchronous invokes, so the answers
are plain values available before any cloud resource is declared.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.awsdata import AvailabilityZone, InstanceFacts, NetworkCard
from infra.config.schema import PlatformConfig
from infra.validation import RegionFacts


def instance_facts_from_result(r: aws.ec2.GetInstanceTypeResult) -> InstanceFacts:
    """pulumi-aws ``getInstanceType`` result -> InstanceFacts."""
    gpus = list(r.gpuses or [])
    disks = list(r.instance_disks or [])
    return InstanceFacts(
        instance_type=r.instance_type,
        vcpus=int(r.default_vcpus or 0),
        memory_mib=int(r.memory_size or 0),
        gpu_count=sum(int(g.count) for g in gpus),
        gpu_name=gpus[0].name if gpus else None,
        gpu_manufacturer=gpus[0].manufacturer if gpus else None,
        gpu_memory_mib=int(gpus[0].memory_size) if gpus else 0,
        efa_supported=bool(r.efa_supported),
        max_efa_interfaces=int(r.efa_maximum_interfaces or 0),
        max_network_cards=int(r.maximum_network_cards or 1),
        max_network_interfaces=int(r.maximum_network_interfaces or 1),
        network_cards=tuple(
            NetworkCard(
                index=int(c.index),
                maximum_network_interfaces=int(c.maximum_interfaces),
                baseline_bandwidth_gbps=float(c.baseline_bandwidth or 0.0),
                interface_types=(),  # not exposed by the provider's data source
            )
            for c in (r.network_cards or [])
        ),
        instance_store_disks=sum(int(d.count) for d in disks),
        instance_store_disk_gb=int(disks[0].size) if disks else 0,
        instance_store_total_gb=int(r.total_instance_storage or 0),
        supported_placement_strategies=tuple(r.supported_placement_strategies or ()),
        architectures=tuple(r.supported_architectures or ()),
    )


@dataclass(frozen=True)
class AccountFacts:
    """The account and partition the stack deploys into (ARNs and key policies need them)."""

    account_id: str
    partition: str
    dns_suffix: str


def account_facts(provider: aws.Provider) -> AccountFacts:
    opts = pulumi.InvokeOptions(provider=provider)
    identity = aws.get_caller_identity(opts=opts)
    partition = aws.get_partition(opts=opts)
    return AccountFacts(identity.account_id, partition.partition, partition.dns_suffix)


def gather_facts(cfg: PlatformConfig, provider: aws.Provider) -> RegionFacts:
    """Ask AWS (or the offline snapshot) about the region and every instance type the config names."""
    opts = pulumi.InvokeOptions(provider=provider)
    zones_result = aws.get_availability_zones(state="available", region=cfg.region, opts=opts)
    zones = tuple(
        AvailabilityZone(name, zone_id)
        for name, zone_id in zip(zones_result.names, zones_result.zone_ids, strict=True)
    )
    types = sorted({p.instance_type for p in cfg.node_pools.values()})
    offerings: dict[str, set[str]] = {z.name: set() for z in zones}
    instances: dict[str, InstanceFacts] = {}
    region_types: frozenset[str] = frozenset()
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
        for itype in types:
            if itype in offered:
                instances[itype] = instance_facts_from_result(
                    aws.ec2.get_instance_type(instance_type=itype, region=cfg.region, opts=opts)
                )
    return RegionFacts(
        region=cfg.region,
        zones=zones,
        offerings={az: frozenset(ts) for az, ts in offerings.items()},
        instances=instances,
        region_types=region_types,
    )
