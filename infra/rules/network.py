"""Rules on the VPC's zones, checked against the region's facts (names, and zone IDs where AWS documents a
constraint by ID)."""

from __future__ import annotations

from collections.abc import Iterator

from infra.model.zones import (
    EKS_MIN_CONTROL_PLANE_ZONES,
    EKS_NETWORK_DOC,
    EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS,
    control_plane_zones,
    vpc_zones,
)
from infra.rules.base import Finding, Need, Phase, RuleContext, at, error, rule

# Zone names are per account: preflight checks them against the live account too.
PLAN_AND_PREFLIGHT = (Phase.plan, Phase.preflight)


@rule("vpc-zones-exist", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def vpc_zones_exist(ctx: RuleContext) -> Iterator[Finding]:
    """network.availability_zones names zones of the stack's region."""
    assert ctx.facts is not None
    names = ctx.facts.zone_names
    unknown = [az for az in ctx.cfg.network.availability_zones if az not in names]
    if unknown:
        yield error(
            at("network", "availability_zones"),
            f"{unknown} are not zones of {ctx.cfg.region}",
            f"use zones from {list(names)}",
        )


@rule("vpc-zone-count", phases=PLAN_AND_PREFLIGHT, needs=[Need.facts])
def vpc_zone_count(ctx: RuleContext) -> Iterator[Finding]:
    """network.az_count is at most the number of zones the region has."""
    assert ctx.facts is not None
    have = len(ctx.facts.zones)
    if ctx.cfg.network.az_count > have:
        yield error(
            at("network", "az_count"),
            f"{ctx.cfg.network.az_count} zones asked for but {ctx.cfg.region} has {have}",
            f"set az_count to at most {have}",
        )


@rule("control-plane-zones", needs=[Need.facts])
def control_plane_zones_supported(ctx: RuleContext) -> Iterator[Finding]:
    """The EKS control plane gets subnets in at least two zones that EKS supports (by zone ID)."""
    assert ctx.facts is not None
    vpc = vpc_zones(ctx.cfg, ctx.facts)
    usable = control_plane_zones(ctx.cfg, ctx.facts)
    if len(usable) >= EKS_MIN_CONTROL_PLANE_ZONES:
        return
    refused = [f"{az} ({ctx.facts.zone_id(az)})" for az in vpc if az not in usable]
    why = f"; EKS refuses control-plane subnets in {', '.join(refused)}" if refused else ""
    spare = [
        z.name
        for z in ctx.facts.zones
        if z.name not in vpc and z.zone_id not in EKS_UNSUPPORTED_CONTROL_PLANE_ZONE_IDS
    ]
    field = "availability_zones" if ctx.cfg.network.availability_zones else "az_count"
    yield error(
        at("network", field),
        f"the VPC's zones {list(vpc)} leave {len(usable)} zone(s) for the EKS control plane, "
        f"CreateCluster needs subnets in at least {EKS_MIN_CONTROL_PLANE_ZONES}{why}",
        f"use at least {EKS_MIN_CONTROL_PLANE_ZONES} zones EKS supports"
        + (f", e.g. add {spare[0]}" if spare else ""),
        EKS_NETWORK_DOC,
    )
