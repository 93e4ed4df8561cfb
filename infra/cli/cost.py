"""``aiplat cost``: hourly and monthly estimates per node pool and per stack, from the price table."""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_CONFIG, EXIT_OK, add_stack_selection, print_error, selected_stacks
from infra.core.errors import ConfigError, ConfigErrors
from infra.core.facts import RegionFacts
from infra.cost.estimate import (
    SIZES,
    Money,
    Option,
    Price,
    PriceTable,
    SourceKind,
    StackCost,
    Usage,
    estimate_stack,
    total,
)
from infra.io.stackfiles import load_stack_config, read_stack_index
from infra.rules import run_rules
from infra.schema.platform import PlatformConfig
from infra.stack.registry import Level, Phase, RuleContext


def _date(value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a date like 2026-12-01") from None


def _non_negative(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a number") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return number


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "cost",
        help="estimate hourly and monthly cost per node pool and per stack",
        description="Estimate each stack's cost from the price table (infra/cost/data/prices.yaml: every "
        "price with its source and date): node pools at min/desired/max as configured and as if bought "
        "On-Demand, Spot or as a Capacity Block; Karpenter GPU pools at min/desired/max GPUs on the types "
        "their NodePools may launch (from the offline AWS data: min and desired = the inference Deployment's "
        "minimum replicas on the cheapest priced type, max = the GPU limit at the dearest priced type per "
        "GPU); the EKS control plane (standard or extended support), NAT "
        "gateways and their data processing, interface endpoints, load balancers, CloudTrail data events, "
        "and cross-region replication of the artifacts. Prices the table lacks are shown as unknown ('?'), "
        "never guessed. Prices whose only source is a third-party blog are marked. With --team: what the "
        "team's jobs cost, summed from their run records in the stack's checkpoints bucket (each attempt's "
        "GPU hours x its pool's node-hour price / the node's GPUs, from the same table), by job and by pool "
        "and purchase option, with the price sources; attempts without a price listed apart. Exit 0; 2 for a "
        "config error, a bad --since or a stack the plan refuses; 6 the bucket could not be read; 8 unknown "
        "team.",
    )
    add_stack_selection(p)
    p.add_argument(
        "--artifact-gb-per-month",
        type=_non_negative,
        default=0.0,
        metavar="GB",
        help="artifacts replicated to each inference region per month (default 0)",
    )
    p.add_argument(
        "--nat-gb-per-month",
        type=_non_negative,
        default=0.0,
        metavar="GB",
        help="data processed by each stack's NAT gateways per month (default 0)",
    )
    p.add_argument(
        "--load-balancers",
        type=int,
        default=None,
        metavar="N",
        help="application load balancers per stack (default: 1 on infer stacks for the inference endpoint, "
        "0 on train stacks)",
    )
    p.add_argument(
        "--cloudtrail-data-events-per-month",
        type=_non_negative,
        default=0.0,
        metavar="EVENTS",
        help="CloudTrail data events delivered per month per stack (default 0)",
    )
    p.add_argument(
        "--on",
        type=_date,
        default=None,
        metavar="DATE",
        help="price the EKS support level on this date (today)",
    )
    p.add_argument("--summary", action="store_true", help="only the summary and the prices used")
    p.add_argument(
        "--team",
        help="what this team's jobs cost, from their run records (one --stack; AWS credentials that read the "
        "team's prefix of the checkpoints bucket)",
    )
    p.add_argument(
        "--since",
        default=None,
        metavar="WHEN",
        help="with --team: attempts that ended since 30d (default), 12h, or a UTC date like 2026-11-01",
    )
    p.add_argument("--json", action="store_true", help="print the estimates as one JSON document")
    p.set_defaults(run=run)


def usd(m: Money, digits: int = 2) -> str:
    """``1,234.56``; ``1,234.56+?`` when part of the amount could not be priced."""
    text = f"{m.usd:,.{digits}f}"
    return text + "+?" if m.unknown else text


def _pools(cost: StackCost) -> Table:
    table = Table(title=f"{cost.stack}: node pools (USD)", title_justify="left")
    for col in ("pool", "type", "buy", "nodes min/des/max", "on-demand /node-h", "spot /node-h"):
        table.add_column(col, no_wrap=True)
    for col in ("cap. block /node-h", "/h min", "/h desired", "/h max", "/month desired"):
        table.add_column(col, justify="right", no_wrap=True)
    for p in cost.pools:
        table.add_row(
            p.pool,
            p.instance_type,
            p.capacity_type.value,
            "/".join(str(p.nodes[s]) for s in SIZES),
            *(_unit(p.prices[o].usd) for o in Option),
            *(usd(p.hourly(s)) for s in SIZES),
            usd(p.hourly().times(cost.hours_per_month)),
        )
    return table


def _karpenter(cost: StackCost) -> Table:
    table = Table(title=f"{cost.stack}: Karpenter GPU pools (USD)", title_justify="left")
    for col in ("pool", "buy", "GPUs min/des/max", "types (priced)", "cheapest /node-h", "dearest /GPU-h"):
        table.add_column(col, no_wrap=True)
    for col in ("/h min", "/h desired", "/h max", "/month desired"):
        table.add_column(col, justify="right", no_wrap=True)
    for k in cost.karpenter:
        cheap, dear = k.cheapest(), k.dearest_per_gpu()
        priced = sum(any(c.prices[o].known for o in k.options()) for c in k.candidates)
        table.add_row(
            k.label,
            ", ".join(c.value for c in k.capacity_types),
            "/".join(str(k.gpus[s]) for s in SIZES),
            f"{len(k.candidates)} ({priced})",
            f"{cheap[0].instance_type} {_unit(cheap[1].usd)}" if cheap else "?",
            f"{dear[0].instance_type} {_unit((dear[1].usd or 0) / dear[0].gpus)}" if dear else "?",
            *(usd(k.hourly(s)) for s in SIZES),
            usd(k.hourly().times(cost.hours_per_month)),
        )
    return table


def _items(cost: StackCost) -> Table:
    table = Table(title=f"{cost.stack}: other costs (USD)", title_justify="left")
    table.add_column("item", overflow="fold")
    table.add_column("quantity", justify="right", overflow="fold")
    table.add_column("unit price", justify="right", overflow="fold")
    table.add_column("/h", justify="right", overflow="fold")
    table.add_column("/month", justify="right", overflow="fold")
    for i in cost.items:
        per = "per month" if i.per_month else "per hour"
        table.add_row(
            i.name,
            f"{i.quantity:,g} {per}",
            f"{_unit(i.price.usd)} / {i.price.unit}",
            usd(i.hourly(cost.hours_per_month), 4),
            usd(i.monthly(cost.hours_per_month)),
        )
    return table


def _totals(cost: StackCost) -> Table:
    table = Table(title=f"{cost.stack}: totals (USD)", title_justify="left")
    table.add_column("pools bought")
    for s in SIZES:
        table.add_column(f"/h {s}", justify="right")
    for s in SIZES:
        table.add_column(f"/month {s}", justify="right")
    rows = [("as configured", None), *((f"all {o.value.replace('_', ' ')}", o) for o in Option)]
    for label, option in rows:
        table.add_row(
            label,
            *(usd(cost.hourly(s, option)) for s in SIZES),
            *(usd(cost.monthly(s, option)) for s in SIZES),
        )
    return table


def _summary(costs: list[StackCost]) -> Table:
    table = Table(title="all stacks, as configured (USD)", title_justify="left")
    table.add_column("stack")
    table.add_column("region")
    table.add_column("/h desired", justify="right")
    for s in SIZES:
        table.add_column(f"/month {s}", justify="right")
    table.add_column("unknown prices")
    for c in costs:
        unknown = c.monthly("max").unknown
        table.add_row(
            c.stack,
            c.region,
            usd(c.hourly()),
            *(usd(c.monthly(s)) for s in SIZES),
            ", ".join(unknown) or "-",
        )
    if len(costs) > 1:
        table.add_row(
            "total",
            "",
            usd(total(c.hourly() for c in costs)),
            *(usd(total(c.monthly(s) for c in costs)) for s in SIZES),
            "",
            style="bold",
        )
    return table


def _unit(usd_: float | None) -> str:
    return "?" if usd_ is None else f"{usd_:,.4f}"


def _prices(costs: list[StackCost], prices: PriceTable) -> tuple[Table, Table]:
    """Every price the estimates used, and the sources they come from (with their dates)."""
    table = Table(
        title=f"prices used (infra/cost/data/prices.yaml, read {prices.read})", title_justify="left"
    )
    for col in ("price", "USD", "per", "source", "note"):
        table.add_column(col, overflow="fold")
    seen: dict[str, Price] = {}
    for c in costs:
        for p in c.prices():
            seen.setdefault(p.label, p)
    for p in seen.values():
        source = f"{p.source} ({BLOG})" if _blog(prices, p) else p.source
        table.add_row(p.label, _unit(p.usd), p.unit, source, p.note or ("" if p.known else "unknown"))
    sources = Table(title="sources", title_justify="left")
    for col in ("source", "kind", "published", "what"):
        sources.add_column(col, overflow="fold")
    sources.add_column("address", overflow="fold", no_wrap=True)  # whole when the terminal is wide enough
    sources.add_column("note", overflow="fold")
    for key in sorted({p.source for p in seen.values()}):
        src = prices.sources.get(key)
        if src is not None:
            sources.add_row(key, src.kind.value, src.published or "undated", src.what, src.url, src.note)
    return table, sources


BLOG = "third-party blog only"


def _blog(prices: PriceTable, price: Price) -> bool:
    """Whether a known price's only source is a third-party blog (marked wherever it is shown)."""
    src = prices.sources.get(price.source)
    return price.known and src is not None and src.kind is SourceKind.third_party_blog


def _show(console: Console, table: Table) -> None:
    """``table`` as is when it fits the terminal; else one two-column block per row (header: value), so
    that no instance type or amount is cut on a narrow (80-column) terminal."""
    # measured as if the terminal had no edge: rich caps a table's measure at the width it is given
    natural = console.measure(table, options=console.options.update_width(100_000)).maximum
    if natural <= console.width:
        console.print(table)
        return
    columns = table.columns
    for row in zip(*(list(c.cells) for c in columns), strict=True):
        block = Table(title=f"{table.title}: {row[0]}", title_justify="left", show_header=False)
        block.add_column(no_wrap=True)
        block.add_column(overflow="fold")
        for column, cell in zip(columns[1:], row[1:], strict=True):
            block.add_row(column.header, cell)
        console.print(block)


def _money(m: Money) -> dict[str, Any]:
    return {"usd": round(m.usd, 6), "unknown": list(m.unknown)}


def _price(p: Price, prices: PriceTable) -> dict[str, Any]:
    src = prices.sources.get(p.source)
    return {
        "label": p.label,
        "usd": p.usd,
        "unit": p.unit,
        "source": p.source,
        "source_kind": src.kind.value if src else None,
        "note": p.note,
    }


def as_json(costs: list[StackCost], prices: PriceTable) -> dict[str, Any]:
    """The estimates as data: per stack the pools, Karpenter pools, other items and totals (hourly and
    monthly per size, as configured and per way to buy), then every price used with its source."""
    stacks = []
    for c in costs:
        stacks.append(
            {
                "stack": c.stack,
                "region": c.region,
                "pools": [
                    {
                        "pool": p.pool,
                        "instance_type": p.instance_type,
                        "capacity_type": p.capacity_type.value,
                        "nodes": dict(p.nodes),
                        "hourly": {s: _money(p.hourly(s)) for s in SIZES},
                        "prices": {o.value: _price(p.prices[o], prices) for o in Option},
                    }
                    for p in c.pools
                ],
                "karpenter": [
                    {
                        "pool": k.label,
                        "gpus": dict(k.gpus),
                        "instance_types": [x.instance_type for x in k.candidates],
                        "hourly": {s: _money(k.hourly(s)) for s in SIZES},
                    }
                    for k in c.karpenter
                ],
                "items": [
                    {
                        "item": i.name,
                        "quantity": i.quantity,
                        "per_month": i.per_month,
                        "monthly": _money(i.monthly(c.hours_per_month)),
                        "price": _price(i.price, prices),
                    }
                    for i in c.items
                ],
                "totals": {
                    (o.value if o else "as_configured"): {
                        "hourly": {s: _money(c.hourly(s, o)) for s in SIZES},
                        "monthly": {s: _money(c.monthly(s, o)) for s in SIZES},
                    }
                    for o in (None, *Option)
                },
                "notes": list(c.notes),
            }
        )
    used = {p.source for c in costs for p in c.prices()}
    return {
        "prices_read": prices.read,
        "hours_per_month": prices.hours_per_month,
        "stacks": stacks,
        "sources": {
            k: prices.sources[k].model_dump(mode="json") for k in sorted(used) if k in prices.sources
        },
    }


def _refusals(
    stack: str, cfg: PlatformConfig, facts: RegionFacts | None, args: argparse.Namespace
) -> list[str]:
    """The errors the plan's rules find (those on AWS facts when the offline data is there): a stack the
    plan refuses is not priced."""
    from infra.io.policypack import stack_allowlists
    from infra.io.regions import known_regions

    ctx = RuleContext(
        cfg,
        stack=stack,
        facts=facts,
        stacks=read_stack_index(args.stacks_dir),
        regions=known_regions(),
        allowlists=stack_allowlists(stack, args.stacks_dir),
    )
    return [f.one_line() for f in run_rules(Phase.plan, ctx) if f.level is Level.error]


def _facts(cfg: PlatformConfig, err: Console) -> RegionFacts | None:
    """The region's offline facts (a refreshed facts file or moto's AWS snapshot, the plan extra): the
    Karpenter pools' types, and what the rules on AWS facts judge."""
    try:
        from infra.io.snapshot import region_facts

        return region_facts(cfg)
    except ModuleNotFoundError as exc:  # the snapshot comes with the plan extra (moto)
        err.print(
            f"note: Karpenter pools not priced and the rules on AWS facts not run: the offline AWS data is "
            f"missing ({exc}); pip install '.[plan]'",
            highlight=False,
        )
        return None


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.prices import load_price_table

    if args.team is not None:
        from infra.cli import cost_team

        args.since = args.since or "30d"
        return cost_team.run(args, console, err)
    if args.since is not None:
        raise ConfigErrors([ConfigError("--since", "only counts with --team", "add --team <team>")])

    try:
        configs = [(s, load_stack_config(s, args.stacks_dir)) for s in selected_stacks(args)]
        prices = load_price_table()
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    if not configs:
        err.print("no stacks found", style="red")
        return EXIT_CONFIG
    usage = Usage(
        on=args.on or dt.date.today(),
        artifact_gb_per_month=args.artifact_gb_per_month,
        nat_gb_per_month=args.nat_gb_per_month,
        load_balancers=args.load_balancers,
        cloudtrail_data_events_per_month=args.cloudtrail_data_events_per_month,
    )
    costs, refused = [], False
    for stack, cfg in configs:
        facts = _facts(cfg, err)
        errors = _refusals(stack, cfg, facts, args)
        for line in errors:
            err.print(f"error: {stack}: {line}", style="red", markup=False, highlight=False, soft_wrap=True)
        refused = refused or bool(errors)
        costs.append(estimate_stack(stack, cfg, prices, usage, facts))
    if refused:
        err.print("error: not priced: the plan refuses these stacks (fix them first)", style="red")
        return EXIT_CONFIG
    if args.json:
        console.out(json.dumps(as_json(costs, prices), indent=1), highlight=False)  # never wrapped
        return EXIT_OK
    for cost in costs if not args.summary else []:
        _show(console, _pools(cost))
        if cost.karpenter:
            _show(console, _karpenter(cost))
        console.print(_items(cost))
        _show(console, _totals(cost))
        for note in cost.notes:
            console.print(f"  note: {note}", highlight=False)
        console.print()
    _show(console, _summary(costs))
    for table in _prices(costs, prices):
        console.print(table)
    blogs = sorted({p.label for c in costs for p in c.prices() if _blog(prices, p)})
    if blogs:
        console.print(
            f"marked: {len(blogs)} prices come from a {BLOG} ({', '.join(blogs)}); "
            "check them on AWS's pricing pages before relying on them",
            highlight=False,
        )
    console.print(
        "'?' = a price the table does not have (see 'prices used'); amounts with '+?' leave those out. "
        "Spot = the highest zone price of the region; Capacity Blocks and ODCRs bill every reserved "
        "instance (max_size). Karpenter pools: GPUs at min/desired = the inference Deployment's minimum "
        "replicas, one per node of the cheapest priced type; at max = gpu_limit at the dearest priced type "
        "per GPU; both capacity types allowed: the cheaper at min/desired, the dearer at max; 'all capacity "
        "block' leaves them as configured. Not estimated: EBS, S3/ECR storage and requests, CloudWatch "
        "Logs, KMS, load balancer capacity units, internet egress.",
        highlight=False,
    )
    return EXIT_OK
