"""``aiplat check-storage``: check a deployed stack's buckets through the S3 API (boto3)."""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_AWS, EXIT_FAILED, EXIT_OK, add_stack_selection, print_error
from infra.core.errors import ConfigErrors
from infra.io.stackfiles import load_stack_config


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "check-storage",
        help="check a deployed stack's buckets (own, replicas, trail) through the S3 and KMS APIs (boto3)",
        description="Exit 0 when every check passes, 1 when one fails, 2 for a config error, 6 when AWS "
        "cannot be reached or the credentials are missing, expired or refused. Uses your AWS credentials "
        "and AWS_ENDPOINT_URL the usual boto3 way.",
    )
    add_stack_selection(p, many=False)
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError

    from infra.io.aws_credentials import credentials_error, require_credentials
    from infra.io.aws_live import boto3_clients, home_region
    from infra.ops.storage_check import check_storage

    try:
        cfg = load_stack_config(args.stack, args.stacks_dir)
    except ConfigErrors as exc:
        print_error(err, args.stack, exc, debug=args.debug)
        return exc.exit_code
    clients = boto3_clients()
    # HeadBucket answers a bare 403 for expired credentials too: ask STS first, as every AWS command does
    require_credentials(clients("sts", home_region(cfg.region)))
    try:
        with console.status(f"checking {args.stack}'s buckets ..."):
            findings = check_storage(cfg, clients)
    except BotoCoreError as exc:  # an endpoint that does not answer, credentials that expired meanwhile
        print_error(err, args.stack, credentials_error(exc) or exc, debug=args.debug)
        return EXIT_AWS
    table = Table(title=f"{args.stack}: buckets")
    for col in ("bucket", "check", "result"):
        table.add_column(col)
    for f in findings:
        table.add_row(f.bucket, f.check, "ok" if f.ok else f"FAIL {f.detail}")
    console.print(table)
    failed = [f for f in findings if not f.ok]
    console.print(f"{len(findings) - len(failed)} ok, {len(failed)} failed")
    return EXIT_FAILED if failed else EXIT_OK
