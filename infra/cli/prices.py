"""``aiplat prices refresh``: regenerate the price table's instance prices from AWS's pricing APIs."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from infra.cli.common import EXIT_AWS, EXIT_CONFIG, EXIT_OK, print_error
from infra.core.errors import ConfigErrors


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "prices",
        help="refresh the price table (infra/cost/data/prices.yaml) from the AWS Price List API",
        description="The price table behind `aiplat cost`: every price with its source and date.",
    )
    actions = p.add_subparsers(dest="prices_command", required=True, metavar="<action>")
    refresh = actions.add_parser(
        "refresh",
        help="read On-Demand, Capacity Block and Spot prices from AWS (read-only) into the table",
        description="pricing:GetProducts on the us-east-1 endpoint (On-Demand Linux shared-tenancy prices "
        "per region and instance type, Capacity Block prices where the Price List has them) and EC2 "
        "DescribeSpotPriceHistory per region, with your AWS credentials (AWS_PROFILE, SSO, "
        "AWS_ENDPOINT_URL). "
        "Every price written names its API and the day it was read. By default every region and instance "
        "type the table has, plus every stack's pool types. Exit 0, 2 for a bad argument or table, 6 when "
        "AWS cannot be reached or refuses the credentials.",
    )
    refresh.add_argument(
        "--region",
        action="append",
        help="only this region (repeatable; default: the table's and the stacks')",
    )
    refresh.add_argument(
        "--instance-type", action="append", help="only this instance type (repeatable), e.g. p5.48xlarge"
    )
    refresh.add_argument(
        "--out", type=Path, default=None, help="write the table here (default: the shipped prices.yaml)"
    )
    refresh.add_argument(
        "--stacks-dir", type=Path, default=None, help="folder of stack files (default: the project's stacks/)"
    )
    refresh.set_defaults(run=run)


def _wanted(args: argparse.Namespace) -> dict[str, set[str]]:
    """region -> instance types: the table's and the stacks' pool types, narrowed by the arguments."""
    from infra.io.prices import load_price_table
    from infra.io.stackfiles import list_stacks, load_stack_config

    wanted: dict[str, set[str]] = {r: set(ts) for r, ts in load_price_table().instances.items()}
    for stack in list_stacks(args.stacks_dir):
        cfg = load_stack_config(stack, args.stacks_dir)
        wanted.setdefault(cfg.region, set()).update(p.instance_type for p in cfg.node_pools.values())
    if args.instance_type:
        wanted = {r: set(args.instance_type) for r in wanted}
    if args.region:
        wanted = {r: wanted.get(r, set(args.instance_type or ())) for r in args.region}
    return {r: ts for r, ts in wanted.items() if ts}


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io.aws_live import boto3_clients, unreadable
    from infra.io.price_refresh import refresh_instances
    from infra.io.prices import load_price_table, price_table_path, write_price_table
    from infra.io.regions import known_regions

    bad = [r for r in args.region or () if r not in known_regions()]
    if bad:
        err.print(f"error: --region: {bad[0]!r} is not an AWS region; fix: use e.g. us-east-1", markup=False)
        return EXIT_CONFIG
    try:
        wanted = _wanted(args)
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    count = sum(len(ts) for ts in wanted.values())
    try:
        with console.status(f"reading {count} instance prices in {len(wanted)} regions ..."):
            table = refresh_instances(load_price_table(), wanted, boto3_clients())
    except (ClientError, BotoCoreError) as exc:
        what = unreadable("pricing:GetProducts/ec2:DescribeSpotPriceHistory", exc)
        err.print(
            f"error: {what}; fix: sign in with credentials allowed to call pricing:GetProducts and "
            "ec2:DescribeSpotPriceHistory (aws sso login, AWS_PROFILE) and run again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_AWS
    except ValueError as exc:  # the Price List answered several prices for one product
        err.print(f"error: {exc}; fix: report it: the filters in infra/io/price_refresh.py need narrowing")
        return EXIT_CONFIG
    out = args.out or price_table_path()
    write_price_table(table, out)
    console.print(f"wrote {out}: {count} instance types in {', '.join(sorted(wanted))} (read {table.read})")
    return EXIT_OK
