"""Which zones the VPC, the EKS control plane and each node pool use: derived from the config and the
region's facts. Pure.

Zone *names* are mapped to physical zones per account; zone *IDs* are the same in every account
(https://docs.aws.amazon.com/ram/latest/userguide/working-with-az-ids.html). AWS documents by zone ID where
EKS does not place control-plane network interfaces, so that check goes by ID.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from infra.core.facts import RegionFacts

if TYPE_CHECKING:
    from infra.schema.platform import PlatformConfig

EKS_NETWORK_DOC = "https://docs.aws.amazon.com/eks/latest/userguide/network-reqs.html"
# "The subnets can't reside in the following Availability Zones" (EKS user guide, network requirements,
# table by zone ID; awsdocs/amazon-eks-user-guide latest/ug/networking/network-reqs.adoc, stored copy of
# 2024-12, read 2026-11-30). CreateCluster answers UnsupportedAvailabilityZoneException otherwise.
EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS = frozenset({"use1-az3", "usw1-az2", "cac1-az3"})
# CreateCluster: "You must specify at least two subnets" in "at least two different Availability Zones".
EKS_MIN_CONTROL_PLANE_ZONES = 2


def eks_supports(zone_id: str) -> bool:
    """Whether EKS accepts control-plane subnets in the zone with this ID."""
    return zone_id not in EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS


def vpc_zones(cfg: PlatformConfig, facts: RegionFacts) -> tuple[str, ...]:
    """The VPC's zones: the configured ones, else the region's first ``az_count`` zones, those where EKS
    takes control-plane subnets first (so a default VPC never loses a control-plane zone)."""
    if cfg.network.availability_zones:
        return tuple(cfg.network.availability_zones)
    ordered = sorted(facts.zones, key=lambda z: not eks_supports(z.zone_id))  # stable: AWS's order otherwise
    return tuple(z.name for z in ordered[: cfg.network.az_count])


def control_plane_zones(cfg: PlatformConfig, facts: RegionFacts) -> tuple[str, ...]:
    """The VPC zones whose private subnets the EKS control plane gets (zones EKS supports)."""
    return tuple(az for az in vpc_zones(cfg, facts) if eks_supports(facts.zone_id(az)))


def pool_zones(cfg: PlatformConfig, facts: RegionFacts, pool_name: str) -> tuple[str, ...]:
    """The zones a pool's nodes run in: the configured ones, else every VPC zone offering the type."""
    pool = cfg.node_pools[pool_name]
    if pool.availability_zones:
        return tuple(pool.availability_zones)
    offering = set(facts.azs_offering(pool.instance_type))
    return tuple(az for az in vpc_zones(cfg, facts) if az in offering)
