"""Rules on the VPC's zones, checked against the region's facts."""

from __future__ import annotations

from collections.abc import Iterator

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
