"""``aiplat cost --team T --since 30d``: what a team's jobs cost, summed from their run records.

Reads every run record under the team's prefix of the stack's checkpoints bucket
(``s3://<checkpoints>/<team>/checkpoints/<job>/run-records/``, ``infra/io/run_records.py``), keeps the
attempts that ended (or, with no end record, started) in the window, and sums the cost each end record holds
(``infra/cost/runs.py``: GPU hours x the node-hour price of the pool's type and purchase option / the node's
GPUs, priced from the same table as ``aiplat cost``) by job and by pool and purchase option, naming every
price source. Attempts without a cost are listed apart with the reason.
"""

from __future__ import annotations

import argparse
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_OK
from infra.core.errors import ConfigError, ConfigErrors
from infra.cost.estimate import PriceTable
from infra.cost.runs import TeamCost, price_drift, team_cost
from infra.storage.config.storage import BucketPurpose
from infra.training.documents.stack import TEAM_CHECKPOINTS

SINCE = re.compile(r"^(\d+)([dh])$")


def since_utc(value: str, now: datetime) -> str:
    """The window's start (ISO, ``Z``) from ``30d``, ``12h`` or a date ``2026-11-01``."""
    m = SINCE.match(value)
    if m:
        n, unit = int(m.group(1)), m.group(2)
        start = now - (timedelta(days=n) if unit == "d" else timedelta(hours=n))
    else:
        try:
            start = datetime.fromisoformat(value).replace(tzinfo=UTC)
        except ValueError:
            raise ConfigErrors(
                [
                    ConfigError(
                        "--since",
                        f"{value!r} is neither a duration nor a date",
                        "pass days or hours back from now (30d, 12h) or a UTC date (2026-11-01)",
                    )
                ]
            ) from None
    return start.strftime("%Y-%m-%dT%H:%M:%SZ")


def _usd(x: float | None) -> str:
    return "?" if x is None else f"{x:,.2f}"


def as_json(cost: TeamCost, stack: str, prices: PriceTable, skipped: list[str]) -> dict[str, Any]:
    """The team's cost as data: totals, per job, per pool and purchase option, the sources, the attempts."""
    return {
        "stack": stack,
        "team": cost.team,
        "since_utc": cost.since_utc,
        "usd": cost.usd,
        "gpu_hours": cost.gpu_hours,
        "by_job": [
            {"job": g.key[0], "attempts": g.attempts, "gpu_hours": g.gpu_hours, "usd": g.usd}
            for g in cost.by("job")
        ],
        "by_pool": [
            {
                "pool": g.key[0],
                "instance_type": g.key[1],
                "purchase_option": g.key[2],
                "attempts": g.attempts,
                "gpu_hours": g.gpu_hours,
                "usd_per_gpu_hour": g.usd_per_gpu_hour,
                "usd": g.usd,
                "sources": list(g.sources),
            }
            for g in cost.by("pool", "instance_type", "purchase_option")
        ],
        "sources": {
            k: (prices.sources[k].model_dump(mode="json") if k in prices.sources else None)
            for k in cost.sources()
        },
        "unknown": [a.as_dict() for a in cost.unknown],
        "attempts": [a.as_dict() for a in cost.attempts],
        "notes": price_drift(cost.priced, prices),
        "skipped": skipped,
    }


def render(cost: TeamCost, stack: str, prices: PriceTable, skipped: list[str], console: Console) -> None:
    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    title = f"{cost.team} on {stack} since {cost.since_utc} (USD)"
    jobs = Table(title=f"{title}: by job", title_justify="left")
    for col in ("job", "attempts", "GPU hours", "USD"):
        jobs.add_column(col, justify="left" if col == "job" else "right")
    for g in cost.by("job"):
        jobs.add_row(g.key[0], str(g.attempts), f"{g.gpu_hours:,.3f}", _usd(g.usd))
    jobs.add_row("total", str(len(cost.priced)), f"{cost.gpu_hours:,.3f}", _usd(cost.usd), style="bold")
    console.print(jobs)
    pools = Table(title=f"{title}: by pool and purchase option", title_justify="left")
    for col in ("pool", "type", "bought", "attempts", "GPU hours", "/GPU-h", "USD", "source"):
        pools.add_column(col, overflow="fold")
    for g in cost.by("pool", "instance_type", "purchase_option"):
        pools.add_row(
            *g.key,
            str(g.attempts),
            f"{g.gpu_hours:,.3f}",
            "several" if g.usd_per_gpu_hour is None else f"{g.usd_per_gpu_hour:,.4f}",
            _usd(g.usd),
            ", ".join(g.sources),
        )
    console.print(pools)
    if cost.sources():
        sources = Table(
            title=f"price sources (infra/cost/data/prices.yaml, read {prices.read})", title_justify="left"
        )
        for col in ("source", "kind", "published", "what", "address"):
            sources.add_column(col, overflow="fold")
        for key in cost.sources():
            src = prices.sources.get(key)
            if src is None:
                sources.add_row(key, "?", "?", "not in today's table (the record names it)", "")
            else:
                sources.add_row(key, src.kind.value, src.published or "undated", src.what, src.url)
        console.print(sources)
    if cost.unknown:
        say(f"not priced ({len(cost.unknown)} attempts, left out of the sums):")
        for a in cost.unknown:
            hours = "" if a.gpu_hours is None else f", {a.gpu_hours:,.3f} GPU hours"
            say(f"  {a.job} {a.attempt} ({a.when or '?'}{hours}): {a.unknown}")
    for note in price_drift(cost.priced, prices):
        say(f"note: {note}")
    for s in skipped:
        say(f"skipped: {s}")
    if not cost.attempts:
        say(f"no run records of {cost.team}'s jobs since {cost.since_utc}")
    say(
        "Each attempt's cost is its record's: GPU hours (nodes x GPUs per node x time from its start to its "
        "end record) x the node-hour price of its pool's type and purchase option / the node's GPUs, from "
        "the price table when the runtime was deployed (Spot: the highest zone price of the region). Node "
        "time outside training (image pull, start-up, idle nodes) is not in a run record."
    )


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.prices import load_price_table
    from infra.io.run_records import team_records
    from infra.io.stackfiles import load_stack_config
    from infra.jobs.rules import team_config

    stacks = [] if getattr(args, "all", False) else list(args.stack or [])
    if len(stacks) != 1:
        raise ConfigErrors(
            [ConfigError("--team", "reads one stack's records", "pass exactly one --stack with --team")]
        )
    stack = stacks[0]
    since = since_utc(args.since, datetime.now(UTC))
    cfg = load_stack_config(stack, args.stacks_dir)
    team_config(cfg, stack, args.team)
    prices = load_price_table()
    root = f"s3://{cfg.bucket_name(BucketPurpose.checkpoints)}/{args.team}/{TEAM_CHECKPOINTS}"
    skipped: list[str] = []
    jobs = team_records(root, skipped, region=cfg.region)
    cost = team_cost(args.team, since, jobs)
    if args.json:
        console.out(json.dumps(as_json(cost, stack, prices, skipped), indent=1), highlight=False)
    else:
        render(cost, stack, prices, skipped, console)
    return EXIT_OK
