"""Checks of a validated config against AWS facts, run before any cloud resource is declared.

Pure: the facts come in as data. Under ``pulumi up`` they are fetched from the AWS API through the
provider's data sources (``infra/facts.py``); under ``aiplat plan`` the same data sources are answered
from the AWS snapshot bundled in moto.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from infra.awsdata import AvailabilityZone, InstanceFacts
from infra.config.loader import CONFIG_KEY
from infra.config.schema import Placement, PlatformConfig
from infra.errors import ConfigError
from infra.lib import efa as efa_lib


@dataclass(frozen=True)
class RegionFacts:
    """What AWS says about the stack's region, limited to what the config refers to."""

    region: str
    zones: tuple[AvailabilityZone, ...]
    # availability zone name -> instance types (of those the config names) offered there
    offerings: dict[str, frozenset[str]]
    instances: dict[str, InstanceFacts]
    # every instance type offered in the region; only fetched when a named type is not offered
    region_types: frozenset[str] = frozenset()

    def azs_offering(self, instance_type: str) -> tuple[str, ...]:
        return tuple(az for az, types in sorted(self.offerings.items()) if instance_type in types)

    @property
    def zone_names(self) -> tuple[str, ...]:
        return tuple(z.name for z in self.zones)


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


def field(*parts: str) -> str:
    return ".".join([CONFIG_KEY, *parts])


def check_against_facts(cfg: PlatformConfig, facts: RegionFacts) -> list[ConfigError]:
    """Every problem the facts reveal, each naming its field, value and fix."""
    errors: list[ConfigError] = []
    unknown_zones = [az for az in cfg.network.availability_zones if az not in facts.zone_names]
    if unknown_zones:
        errors.append(
            ConfigError(
                field("network", "availability_zones"),
                f"{unknown_zones} are not zones of {cfg.region}",
                f"use zones from {list(facts.zone_names)}",
            )
        )
    if cfg.network.az_count > len(facts.zones):
        errors.append(
            ConfigError(
                field("network", "az_count"),
                f"{cfg.network.az_count} zones asked for but {cfg.region} has {len(facts.zones)}",
                f"set az_count to at most {len(facts.zones)}",
            )
        )
    for name, pool in cfg.node_pools.items():
        where = field("node_pools", name, "instance_type")
        azs = facts.azs_offering(pool.instance_type)
        if not azs:
            close = difflib.get_close_matches(pool.instance_type, sorted(facts.region_types), n=3, cutoff=0.5)
            fix = (
                f"use one offered there, e.g. {', '.join(close)}"
                if close
                else "pick a type offered in the region"
            )
            errors.append(ConfigError(where, f"{pool.instance_type!r} is not offered in {cfg.region}", fix))
            continue
        itype = facts.instances[pool.instance_type]
        errors.extend(_check_pool(cfg, facts, name, itype))
        if pool.gpu and not itype.has_gpus:
            errors.append(
                ConfigError(
                    field("node_pools", name, "gpu"),
                    f"true but {pool.instance_type} has no GPUs",
                    "use a GPU instance type (g5, g6, p4d, p5, ...) or set gpu: false",
                )
            )
        if not pool.gpu and itype.has_gpus:
            errors.append(
                ConfigError(
                    field("node_pools", name, "gpu"),
                    f"false but {pool.instance_type} has {itype.gpu_count} GPUs",
                    "set gpu: true or use a CPU instance type for a system pool",
                )
            )
    return errors


def _check_pool(
    cfg: PlatformConfig, facts: RegionFacts, name: str, itype: InstanceFacts
) -> list[ConfigError]:
    """Checks of one pool whose type is offered in the region."""
    pool = cfg.node_pools[name]
    errors: list[ConfigError] = []
    at = lambda *parts: field("node_pools", name, *parts)  # noqa: E731
    t = pool.instance_type
    vpc = vpc_zones(cfg, facts)
    offering = facts.azs_offering(t)

    if pool.gpus_per_node is not None and pool.gpus_per_node != itype.gpu_count:
        errors.append(
            ConfigError(
                at("gpus_per_node"),
                f"{pool.gpus_per_node} but {t} has {itype.gpu_count} GPUs",
                f"set gpus_per_node: {itype.gpu_count} or pick a type with {pool.gpus_per_node} GPUs",
            )
        )

    for az in pool.availability_zones:
        if az not in vpc:
            errors.append(
                ConfigError(
                    at("availability_zones"),
                    f"{az!r} is not one of the VPC's zones {list(vpc)}",
                    "add it to network.availability_zones or pick one of those",
                )
            )
        elif az not in offering:
            errors.append(
                ConfigError(
                    at("availability_zones"),
                    f"{t} is not offered in {az}",
                    "use a zone that offers it: "
                    + (", ".join(a for a in offering if a in vpc) or "none in this VPC"),
                )
            )
    if not pool.availability_zones and not any(az in offering for az in vpc):
        errors.append(
            ConfigError(
                at("instance_type"),
                f"{t} is not offered in any of the VPC's zones {list(vpc)}",
                f"add a zone that offers it ({', '.join(offering)}) to network.availability_zones",
            )
        )

    if pool.efa:
        limit = efa_lib.max_efa_interfaces(itype)
        if limit == 0:
            errors.append(
                ConfigError(
                    at("efa"),
                    f"true but {t} does not support EFA",
                    "use an EFA type (p4d.24xlarge, p5.48xlarge, p5en.48xlarge, g6e.48xlarge, ...) "
                    "or set efa: false",
                )
            )
        elif pool.efa_interfaces is not None and pool.efa_interfaces > limit:
            errors.append(
                ConfigError(
                    at("efa_interfaces"),
                    f"{pool.efa_interfaces} but {t} supports at most {limit} EFA interfaces",
                    f"set efa_interfaces to at most {limit}, or leave it out to attach all {limit}",
                )
            )
    single_zone_reason = (
        "EFA" if pool.efa else "a cluster placement group" if pool.placement_group_wanted else None
    )
    if single_zone_reason and len(pool.availability_zones) != 1:
        spread = list(pool.availability_zones) or list(pool_zones(cfg, facts, name))
        errors.append(
            ConfigError(
                at("availability_zones"),
                f"the pool uses {single_zone_reason} but spans {len(spread)} zones/subnets {spread}",
                "name exactly one zone, e.g. availability_zones: "
                f"[{spread[0] if spread else 'a zone offering ' + t}]",
            )
        )
    if pool.placement_group_wanted and "cluster" not in itype.supported_placement_strategies:
        errors.append(
            ConfigError(
                at("placement"), f"{t} does not support cluster placement groups", "set placement: none"
            )
        )

    reservation = pool.capacity_reservation
    if reservation is not None:
        if pool.availability_zones and reservation.availability_zone not in pool.availability_zones:
            what = (
                "the pool's placement group and nodes are" if pool.placement_group_wanted else "the pool runs"
            )
            errors.append(
                ConfigError(
                    at("capacity_reservation", "availability_zone"),
                    f"reservation {reservation.id} is in {reservation.availability_zone} but {what} in "
                    f"{list(pool.availability_zones)}",
                    f"set availability_zones: [{reservation.availability_zone}] "
                    "(a reservation serves one zone)",
                )
            )
        if pool.placement is Placement.cluster and reservation.placement_group is None:
            errors.append(
                ConfigError(
                    at("placement"),
                    f"cluster with capacity reservation {reservation.id} "
                    "but no capacity_reservation.placement_group",
                    "name the cluster placement group the reservation was created in, or set placement: auto",
                )
            )
    return errors
