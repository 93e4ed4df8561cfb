"""``aiplat addon-versions``: record a Kubernetes minor's EKS add-on builds and support dates in the data
files the plan and the pack read (``infra/cluster/data/addon_builds.json``, ``eks_versions.json``)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from rich.console import Console

from infra.cli.arguments import aws_region, kubernetes_minor
from infra.cli.common import EXIT_AWS, EXIT_FAILED, EXIT_OK, print_error


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "addon-versions",
        help="record a Kubernetes minor's EKS add-on builds and support dates (infra/cluster/data/)",
        description="Asks DescribeAddonVersions (your AWS credentials, read-only) for every add-on the "
        "platform installs and writes the minor's builds, EKS's default first, each with its source and "
        "date, into addon_builds.json, and DescribeClusterVersions for the minor's end of standard and "
        "extended support into eks_versions.json (the calendar the cost estimate and the pack's "
        "eks-supported-version read); other minors are kept. Review the diff (git diff), then "
        "`aiplat plan`. Exit 1 (nothing written) when an add-on has no build for the minor, 2 for a bad "
        "argument, 6 when the credentials are missing, expired or refused or AWS does not answer.",
    )
    p.add_argument(
        "--kubernetes-version", required=True, type=kubernetes_minor, help="Kubernetes minor, e.g. 1.36"
    )
    p.add_argument(
        "--region", default="us-east-1", type=aws_region, help="region to ask (builds can differ per region)"
    )
    p.add_argument(
        "--out-dir",
        type=Path,
        default=None,
        help="write addon_builds.json and eks_versions.json here (default: infra/cluster/data/)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.cluster.addon_versions import DATA_FILE
    from infra.cluster.calendar import CALENDAR_FILE
    from infra.io.aws_credentials import require_credentials
    from infra.io.aws_live import boto3_clients, home_region, unreadable
    from infra.ops.addon_versions import addon_builds, record, record_calendar, support_dates

    minor = args.kubernetes_version
    clients = boto3_clients()
    require_credentials(clients("sts", home_region(args.region)))  # else one line and exit 6
    eks = clients("eks", args.region)
    try:
        with console.status(f"asking EKS in {args.region} for the add-on builds of {minor} ..."):
            found = addon_builds(eks, minor)
            dates = support_dates(eks, minor)
    except (BotoCoreError, ClientError) as exc:  # a denied API, an endpoint that does not answer
        what = unreadable("eks:DescribeAddonVersions/DescribeClusterVersions", exc)
        print_error(err, None, ValueError(str(what)), debug=args.debug)
        return EXIT_AWS
    missing = [a for a, v in found.items() if not v]
    for addon in missing:
        print_error(
            err,
            None,
            ValueError(
                f"{addon}: EKS in {args.region} lists no build for Kubernetes {minor}, nothing written; "
                "fix: wait until EKS supports the minor there, or ask another --region"
            ),
            debug=False,
        )
    if missing:
        return EXIT_FAILED
    out = args.out_dir / DATA_FILE.name if args.out_dir else DATA_FILE
    where = f"({args.region}, {eks.meta.endpoint_url})"
    today = datetime.date.today()
    changes = record(out, minor, found, f"eks:DescribeAddonVersions kubernetesVersion={minor} {where}", today)
    for c in changes:
        moved = f"{c.default_before} -> {c.default_after}" if c.default_before != c.default_after else "same"
        console.print(
            f"{c.addon}: default {c.default_after} ({moved}); {len(c.added)} build(s) added, "
            f"{len(c.dropped)} dropped",
            markup=False,
            highlight=False,
        )
    written = [str(out)]
    if dates is None:  # the builds are what the plan needs; the dates are the pack's and the estimate's
        err.print(
            f"warning: EKS lists no support dates for {minor} (DescribeClusterVersions); the calendar keeps "
            "no row for it, so the pack's eks-supported-version refuses it until one is recorded",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    else:
        cal = args.out_dir / CALENDAR_FILE.name if args.out_dir else CALENDAR_FILE
        source = f"eks:DescribeClusterVersions clusterVersions={minor} {where}"
        before = record_calendar(cal, minor, dates, source, today)
        was = f" (was {before.standard_until})" if before and before.standard_until != dates[0] else ""
        console.print(
            f"{minor}: standard support until {dates[0]}{was}, extended until {dates[1]}",
            markup=False,
            highlight=False,
        )
        written.append(str(cal))
    console.print(
        f"wrote {' and '.join(written)} ({minor}); review the diff (git diff), then "
        f"`aiplat plan --stack <stack>` with cluster.kubernetes_version: {minor!r}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK
