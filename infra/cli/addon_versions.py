"""``aiplat addon-versions``: record the EKS add-on builds of a Kubernetes minor in the data file the plan
reads (``infra/cluster/data/addon_builds.json``)."""

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
        help="record the EKS add-on builds of a Kubernetes minor (infra/cluster/data/addon_builds.json)",
        description="Asks DescribeAddonVersions (your AWS credentials, read-only) for every add-on the "
        "platform installs and writes the minor's builds, EKS's default first, each with its source and "
        "date, into the data file the plan reads; other minors are kept. Review the diff (git diff), then "
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
        "--out", type=Path, default=None, help="write here (default: the shipped addon_builds.json)"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.cluster.addon_versions import DATA_FILE
    from infra.io.aws_credentials import require_credentials
    from infra.io.aws_live import boto3_clients, home_region, unreadable
    from infra.ops.addon_versions import addon_builds, record

    minor = args.kubernetes_version
    clients = boto3_clients()
    require_credentials(clients("sts", home_region(args.region)))  # else one line and exit 6
    eks = clients("eks", args.region)
    try:
        with console.status(f"asking EKS in {args.region} for the add-on builds of {minor} ..."):
            found = addon_builds(eks, minor)
    except (BotoCoreError, ClientError) as exc:  # a denied API, an endpoint that does not answer
        print_error(
            err, None, ValueError(str(unreadable("eks:DescribeAddonVersions", exc))), debug=args.debug
        )
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
    out = args.out or DATA_FILE
    source = f"eks:DescribeAddonVersions kubernetesVersion={minor} ({args.region}, {eks.meta.endpoint_url})"
    changes = record(out, minor, found, source, datetime.date.today())
    for c in changes:
        moved = f"{c.default_before} -> {c.default_after}" if c.default_before != c.default_after else "same"
        console.print(
            f"{c.addon}: default {c.default_after} ({moved}); {len(c.added)} build(s) added, "
            f"{len(c.dropped)} dropped",
            markup=False,
            highlight=False,
        )
    console.print(
        f"wrote {out} ({minor}); review it (git diff), then `aiplat plan --stack <stack>` with "
        f"cluster.kubernetes_version: {minor!r}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK
