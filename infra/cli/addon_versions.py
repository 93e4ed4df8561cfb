"""``aiplat addon-versions``: the EKS add-on builds for a Kubernetes minor, as rows for the version table."""

from __future__ import annotations

import argparse
import datetime

from rich.console import Console

from infra.cli.arguments import aws_region, kubernetes_minor
from infra.cli.common import EXIT_AWS, EXIT_FAILED, EXIT_OK, print_error


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "addon-versions",
        help="print the EKS add-on builds of a Kubernetes minor for infra/cluster/addon_versions.py",
        description="Asks DescribeAddonVersions (your AWS credentials) for every add-on the platform "
        "installs and prints the ADDON_BUILDS entry to paste into infra/cluster/addon_versions.py. Exit 1 "
        "when an add-on has no build for the minor, 2 for a bad argument, 6 when the credentials are "
        "missing, expired or refused or AWS does not answer.",
    )
    p.add_argument(
        "--kubernetes-version", required=True, type=kubernetes_minor, help="Kubernetes minor, e.g. 1.35"
    )
    p.add_argument(
        "--region", default="us-east-1", type=aws_region, help="region to ask (builds can differ per region)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io.aws_credentials import require_credentials
    from infra.io.aws_live import boto3_clients, home_region, unreadable
    from infra.ops.addon_versions import addon_builds, table_rows

    clients = boto3_clients()
    require_credentials(clients("sts", home_region(args.region)))  # else one line and exit 6
    try:
        builds = addon_builds(clients("eks", args.region), args.kubernetes_version)
    except (BotoCoreError, ClientError) as exc:  # a denied API, an endpoint that does not answer
        print_error(
            err, None, ValueError(str(unreadable("eks:DescribeAddonVersions", exc))), debug=args.debug
        )
        return EXIT_AWS
    console.print(
        table_rows(args.kubernetes_version, builds, args.region, datetime.date.today()),
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    missing = [a for a, v in builds.items() if not v]
    for addon in missing:
        print_error(err, None, ValueError(f"{addon}: no build for {args.kubernetes_version}"), debug=False)
    return EXIT_FAILED if missing else EXIT_OK
