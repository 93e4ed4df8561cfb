"""Warnings for what the policy pack's allowlists (``infra/stack/allowlists.py``, with the stack's pack config
file on top) would refuse: the plan says it once, on the config field, before ``aiplat review`` repeats it on
every resource."""

from __future__ import annotations

from collections.abc import Iterator

from infra.stack.allowlists import type_allowed
from infra.stack.registry import Finding, Need, RuleContext, at, rule, warning

# Where the allowlists are described and how a review may change them.
ALLOWLISTS_DOC = "docs/policy-pack.md#allowlists"


@rule("region-in-pack-allowlist", needs=[Need.regions])
def region_in_pack_allowlist(ctx: RuleContext) -> Iterator[Finding]:
    """The stack's region, and its replication targets, are ones the policy pack allows for its role."""
    cfg, role = ctx.cfg, ctx.cfg.role.value
    allowed = ctx.allowlists.regions_for(role)
    replication = ctx.allowlists.replication_regions
    if cfg.region in ctx.regions and cfg.region not in allowed:
        yield warning(
            at("region"),
            f"{cfg.region} is outside the regions the policy pack allows for {role} stacks "
            f"({', '.join(allowed)}): aiplat review refuses every resource of the stack "
            "(data-residency-regions)",
            f"use one of {', '.join(allowed)}, or allow {cfg.region} in the pack config "
            f"(data-residency-regions.allowedRegions.{role}, see {ALLOWLISTS_DOC})",
        )
    for i, region in enumerate(cfg.storage.replicate_to):
        if region in ctx.regions and region not in replication:
            yield warning(
                at("storage", "replicate_to", str(i)),
                f"{region} is not a replication region the policy pack allows "
                f"({', '.join(replication)}): aiplat review refuses the replication "
                "(data-residency-replication)",
                f"replicate to one of those, or allow {region} in the pack config "
                f"(data-residency-replication.replicationRegions, see {ALLOWLISTS_DOC})",
            )


@rule("instance-type-in-pack-allowlist")
def instance_type_in_pack_allowlist(ctx: RuleContext) -> Iterator[Finding]:
    """Every node pool's instance type is one the policy pack allows for the stack."""
    patterns = ctx.allowlists.instance_types
    for name, pool in ctx.cfg.node_pools.items():
        if not type_allowed(pool.instance_type, patterns):
            yield warning(
                at("node_pools", name, "instance_type"),
                f"{pool.instance_type} is not an instance type the policy pack allows in stack "
                f"{ctx.stack or '(this stack)'} ({', '.join(patterns)}): aiplat review refuses its node "
                "group (instance-type-allowlist)",
                f"use one of those, or allow it in the pack config "
                f"(instance-type-allowlist.allowedInstanceTypes, see {ALLOWLISTS_DOC})",
            )
