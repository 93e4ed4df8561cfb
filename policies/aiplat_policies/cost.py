"""What a stack may cost: its estimated monthly cost at max size under a cap (the stack's pack config).

The estimate is ``aiplat cost``'s (``infra.cost.estimate.estimate_stack``) over the stack's config from
``PULUMI_CONFIG``; a Karpenter pool's instance types come from the NodePool in the plan, with the GPU
counts of ``infra/core/instance_types.py``. The cap bounds the worst case the stack's size commits to:
managed pools at ``max_size`` (a Capacity Block or ODCR bills every reserved instance anyway), Karpenter
pools at their GPU limit on the dearest priced type, the fixed costs; traffic is priced at zero volume.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

from infra.core.errors import PlatformError
from infra.core.instance_types import TABLE
from infra.cost.estimate import (
    REFRESH_PRICES,
    Candidate,
    Lookup,
    Money,
    Option,
    StackCost,
    Usage,
    estimate_stack,
)
from infra.io.prices import load_price_table
from infra.schema.parse import parse_platform_config

from .core import MEDIUM, Ctx, Stack, Violation, dig, stack_rule, violation
from .nodes import INSTANCE_TYPE_KEY, NODE_POOL, karpenter_allowed

# Monthly USD a stack may reach at max size when its pack config sets no maxMonthlyUsd (the examples reach
# at most $81,393: fsx, p5.48xlarge nodes; prices.yaml of 2026-11-30).
DEFAULT_MAX_MONTHLY_USD = 100_000
UNPRICED = ("ignore", "violation")


def karpenter_candidates(stack: Stack, look: Lookup) -> dict[str, tuple[tuple[Candidate, ...], list[str]]]:
    """NodePool name -> (the candidates with GPU counts from the instance-type table, the types it lacks)."""
    out: dict[str, tuple[tuple[Candidate, ...], list[str]]] = {}
    for pool in stack.of_type(NODE_POOL):
        name = dig(pool.props, "metadata", "name")
        if not isinstance(name, str):
            continue
        types = sorted(set(karpenter_allowed(pool, INSTANCE_TYPE_KEY)))
        known = [TABLE[t] for t in types if t in TABLE and TABLE[t].gpus > 0]
        candidates = tuple(
            Candidate(
                row.name,
                row.gpus,
                {o: look.instance(row.name, o) for o in (Option.on_demand, Option.spot)},
                vcpus=row.vcpus,
                memory_mib=row.memory_mib,
            )
            for row in known
        )
        out[name] = (candidates, [t for t in types if t not in {c.instance_type for c in candidates}])
    return out


def estimate(stack: Stack, ctx: Ctx) -> tuple[StackCost, list[str]]:
    """The stack's estimate from its config and the plan's NodePools, and the Karpenter types without a GPU
    count in the instance-type table. Raises PlatformError (ConfigErrors) when the config does not parse."""
    cfg = parse_platform_config(dict(ctx.stack.platform or {}))
    table = load_price_table()
    cost = estimate_stack(ctx.stack.name, cfg, table, Usage(on=ctx.today))
    found = karpenter_candidates(stack, Lookup(table, cfg.region))
    missing: list[str] = []
    pools = []
    for k in cost.karpenter:
        candidates, lacking = found.get(k.pool, ((), []))
        missing += [f"karpenter.{k.pool}: {t}" for t in lacking]
        # pod=None: only the max size is capped, which needs no fit of the replica's requests
        pools.append(dataclasses.replace(k, candidates=candidates, pod=None))
    return dataclasses.replace(cost, karpenter=tuple(pools)), missing


def usd(amount: float) -> str:
    return f"${amount:,.0f}"


@stack_rule(
    "cost-cap",
    description="The stack's estimated monthly cost at max size (node pools at max_size, Karpenter GPU pools "
    "at their GPU limit, EKS, NAT gateways, interface endpoints, load balancer) stays under its cap (config "
    "maxMonthlyUsd), priced from the table of 'aiplat cost'.",
    severity=MEDIUM,
    doc="https://aws.amazon.com/ec2/pricing/on-demand/",
    unknowns="The estimate comes from the stack's config, not from resource properties, so values unknown at "
    "preview do not reach it; a missing or invalid config is a violation. Prices the table does not have are "
    "never guessed: by default (unpriced 'violation') any unpriced item is a violation, since the cap cannot "
    "hold what it cannot price (a region without prices would pass at $0); a stack whose pack config sets "
    "unpriced 'ignore' has the priced part, a lower bound, compared with the cap, the rest named. A region "
    "without instance prices in the table is a violation even then (its nodes, most of the cost, are all "
    "unpriced), unless the pack config names it in unpricedRegions.",
    config={
        "maxMonthlyUsd": {
            "type": "number",
            "default": DEFAULT_MAX_MONTHLY_USD,
            "description": "The most USD per month the stack may cost at max size.",
        },
        "unpriced": {
            "type": "string",
            "enum": list(UNPRICED),
            "default": "violation",
            "description": "An item without a price: 'violation' (default) or 'ignore' (cap the priced part, "
            "a lower bound; set it only where the missing prices are known to be small). Does not cover a "
            "region without instance prices: see unpricedRegions.",
        },
        "unpricedRegions": {
            "type": "array",
            "items": {"type": "string"},
            "default": [],
            "description": "Regions accepted without instance prices in the table (the cap then bounds "
            "only the rest, not the nodes). Record the prices instead: 'aiplat prices refresh --region R'.",
        },
    },
)
def cost_cap(stack: Stack, ctx: Ctx) -> Iterator[Violation]:
    cap = float(ctx.config["maxMonthlyUsd"])
    if not isinstance(ctx.stack.platform, Mapping):
        yield violation(
            f"stack {ctx.stack.name!r}: the pack was given no aiplat:platform config, so its cost cannot be "
            "estimated",
            "run the pack through 'pulumi preview --policy-pack policies' on an aiplat stack (the CLI passes "
            "the stack's config) or 'aiplat review'",
        )
        return
    try:
        cost, missing = estimate(stack, ctx)
    except PlatformError as exc:
        yield violation(
            f"stack {ctx.stack.name!r}: its config does not validate, so its cost cannot be estimated: {exc}",
            "fix the stack config ('aiplat plan --stack' names the field)",
        )
        return
    monthly: Money = cost.monthly("max")
    unpriced = list(monthly.unknown) + missing
    refresh = REFRESH_PRICES.format(region=cost.region)
    if not cost.region_priced and cost.region not in ctx.config.get("unpricedRegions", []):
        # 'unpriced: ignore' accepts small unpriced items; a region without instance prices leaves every
        # node out, and its sum (the control plane, say) would pass any cap
        yield violation(
            f"stack {ctx.stack.name!r} is in {cost.region}, which the price table has no instance prices "
            f"for: {usd(monthly.usd)}/month at max size leaves out every node "
            f"({'; '.join(unpriced)}), so its cap of {usd(cap)} does not bound it",
            f"record the region's prices with `{refresh}` (your AWS credentials, read-only), or accept an "
            f'unbounded estimate: set {{"cost-cap": {{"unpricedRegions": ["{cost.region}"]}}}} in '
            f"stacks/policy-pack/{ctx.stack.name}.json",
        )
        return
    left_out = f" (left out, no price or GPU count: {'; '.join(unpriced)})" if unpriced else ""
    if monthly.usd > cap:
        yield violation(
            f"stack {ctx.stack.name!r} can cost {usd(monthly.usd)}/month at max size{left_out}, "
            f"over its cap of {usd(cap)}",
            "lower max_size / Karpenter gpu_limit ('aiplat cost --stack' shows each pool), or raise "
            f"cost-cap.maxMonthlyUsd in the stack's pack config (stacks/policy-pack/{ctx.stack.name}.json)",
        )
    elif unpriced and ctx.config.get("unpriced", "violation") != "ignore":
        yield violation(
            f"stack {ctx.stack.name!r}: {usd(monthly.usd)}/month at max size is under its cap of "
            f"{usd(cap)}, but the estimate could not price {'; '.join(unpriced)}, so the cap does not "
            "bound them",
            f"record instance prices with `{refresh}` (others: add them to infra/cost/data/prices.yaml "
            'with their source), or accept a lower bound: set {"cost-cap": {"unpriced": "ignore"}} in '
            f"stacks/policy-pack/{ctx.stack.name}.json",
        )
