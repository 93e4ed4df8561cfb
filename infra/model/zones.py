"""Which zones the VPC and each node pool use: derived from the config and the region's facts. Pure."""

from __future__ import annotations

from infra.model.config.schema import PlatformConfig
from infra.model.facts import RegionFacts


def vpc_zones(cfg: PlatformConfig, facts: RegionFacts) -> tuple[str, ...]:
    """The VPC's zones: the configured ones, else the region's first ``az_count``."""
    if cfg.network.availability_zones:
        return tuple(cfg.network.availability_zones)
    return facts.zone_names[: cfg.network.az_count]


def pool_zones(cfg: PlatformConfig, facts: RegionFacts, pool_name: str) -> tuple[str, ...]:
    """The zones a pool's nodes run in: the configured ones, else every VPC zone offering the type."""
    pool = cfg.node_pools[pool_name]
    if pool.availability_zones:
        return tuple(pool.availability_zones)
    offering = set(facts.azs_offering(pool.instance_type))
    return tuple(az for az in vpc_zones(cfg, facts) if az in offering)
