"""``aiplat facts refresh --region R``: read a region's AWS facts with your credentials into a dated file that
the offline plan then uses for that region instead of moto's bundled snapshot."""

from __future__ import annotations

import argparse
import difflib
from pathlib import Path

from rich.console import Console

from infra.cli.common import EXIT_AWS, EXIT_CONFIG, EXIT_OK
from infra.io.facts_file import FACTS_DIR_ENV, facts_dir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "facts",
        help="refresh the AWS facts (zones, instance types, offerings) the offline plan reads",
        description="The offline plan answers AWS data calls from moto's bundled snapshot unless a "
        "refreshed facts file covers the stack's region: facts/<region>.json at the project root (or in "
        f"${FACTS_DIR_ENV}). Fact-based refusals name the data that answered and its date.",
    )
    actions = p.add_subparsers(dest="facts_command", required=True, metavar="<action>")
    refresh = actions.add_parser(
        "refresh",
        help="read a region's facts from EC2 (read-only) into facts/<region>.json",
        description="Read-only EC2 calls with your AWS credentials (AWS_PROFILE, SSO, AWS_ENDPOINT_URL): "
        "DescribeAvailabilityZones, DescribeInstanceTypeOfferings (region and availability-zone) and "
        "DescribeInstanceTypes, paginated; written with the date and the endpoint that answered. "
        "Exit 0, 2 for a bad argument, 6 when AWS cannot be reached or refuses the credentials.",
    )
    refresh.add_argument("--region", required=True, help="AWS region, e.g. eu-west-1")
    refresh.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help=f"folder for <region>.json (default: ${FACTS_DIR_ENV}, else facts/ at the project root)",
    )
    refresh.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io.aws_live import boto3_clients, unreadable
    from infra.io.facts_file import write_facts_file
    from infra.io.facts_refresh import read_region_snapshot
    from infra.io.regions import known_regions

    regions = known_regions()
    if args.region not in regions:
        close = difflib.get_close_matches(args.region, sorted(regions), n=3)
        hint = f"did you mean {', '.join(close)}?" if close else "use an AWS region name such as eu-west-1"
        err.print(f"error: --region: {args.region!r} is not an AWS region; fix: {hint}", markup=False)
        return EXIT_CONFIG
    try:
        with console.status(f"reading {args.region}'s zones, instance types and offerings ..."):
            facts = read_region_snapshot(boto3_clients()("ec2", args.region), args.region)
    except (ClientError, BotoCoreError) as exc:
        what = unreadable(
            "ec2:DescribeAvailabilityZones/DescribeInstanceTypeOfferings/DescribeInstanceTypes", exc
        )
        err.print(
            f"error: {what}; fix: sign in with credentials allowed to call these read-only APIs in "
            f"{args.region} (aws sso login, AWS_PROFILE) and run again",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_AWS
    path = write_facts_file(facts, args.out_dir or facts_dir())
    console.print(
        f"wrote {path}: {len(facts.zones)} zones, {len(facts.instance_types)} instance types, "
        f"{len(facts.region_offerings)} offered in {args.region} (read {facts.fetched_at:%Y-%m-%d %H:%M} UTC "
        f"from {facts.endpoint}); the offline plan now uses it for {args.region}",
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK
