"""``aiplat preflight``: read-only checks against the live AWS account before ``pulumi up``."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_AWS, EXIT_FAILED, EXIT_OK, add_stack_selection, print_error, selected_stacks
from infra.core.errors import ConfigErrors
from infra.io.rollout_config import load_rollout_config, rollout_file
from infra.io.stackfiles import load_stack_config

STYLE = {"pass": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "preflight",
        help="check the live AWS account before pulumi up (read-only)",
        description="Read-only boto3 checks of each stack's account and region: credentials, region "
        "enabled and its STS endpoint, instance types offered in the pools' zones (by zone ID), EFA, the "
        "Karpenter pools' NVIDIA types offered in the VPC's zones, On-Demand/Spot vCPU quotas for managed "
        "pools at max_size and Karpenter pools at their GPU limit, capacity reservations, EKS add-on "
        "versions, the Auto "
        "Scaling service-linked role, the cluster endpoint once it exists; once per run the state backend "
        "and secrets provider of rollout.yaml. Uses your AWS credentials the usual boto3 way (AWS_PROFILE, "
        "AWS_ENDPOINT_URL...). A check that could not run (an API denied, a region that does not answer) is "
        "'skip' with the reason (never 'pass'), so is a check with nothing on the stack to look at (the "
        "global endpoint's DNS on a train stack, the cluster endpoint before the cluster exists); the "
        "caller's account must be security.account.id. Exit 0 when nothing fails, 1 when a check fails, 2 "
        "for a config error, 6 when the credentials are missing, expired or refused.",
    )
    add_stack_selection(p)
    p.add_argument(
        "--problems-only", action="store_true", help="list only the checks that warn, fail or were skipped"
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON document: every check's row and the counts"
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.aws_credentials import require_credentials
    from infra.io.aws_live import boto3_clients, home_region
    from infra.ops.preflight import PROJECT, Status, preflight

    try:
        rollout = load_rollout_config() if rollout_file().is_file() else None
        stacks = [(s, load_stack_config(s, args.stacks_dir)) for s in selected_stacks(args)]
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    clients = boto3_clients()
    for home in sorted({home_region(cfg.region) for _, cfg in stacks}):
        require_credentials(clients("sts", home))  # else one line and exit 6, as every AWS command
    if rollout is None:
        err.print(f"warning: {rollout_file()} not found: state backend and secrets provider not checked")
    with (err if args.json else console).status("preflight ...") as status:
        report = preflight(
            stacks,
            clients,
            rollout=rollout,
            on_stack=lambda stack: status.update(f"preflight {stack}: asking AWS ..."),
        )
    if args.json:
        rows = [r for r in report.rows if not args.problems_only or r.status is not Status.passed]
        counts = {status.value: report.count(status) for status in Status}
        console.out(
            json.dumps({"rows": [asdict(r) for r in rows], "counts": counts}, indent=1), highlight=False
        )
    for scope in [PROJECT, *(s for s, _ in stacks)] if not args.json else []:
        rows = [r for r in report.rows if r.scope == scope]
        shown = [r for r in rows if not args.problems_only or r.status is not Status.passed]
        if not rows:
            continue
        passed = sum(r.status is Status.passed for r in rows)
        table = Table(title=f"{scope}: {passed} of {len(rows)} checks pass", title_justify="left")
        table.add_column("check", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for col in ("field", "finding", "fix"):
            table.add_column(col, overflow="fold")
        for r in shown:
            fix = (r.fix or "") + (f" ({r.doc})" if r.doc and r.status is not Status.passed else "")
            table.add_row(r.check, f"[{STYLE[r.status.value]}]{r.status.value}[/]", r.field, r.detail, fix)
        if shown:
            console.print(table)
        else:
            console.print(f"{scope}: all {len(rows)} checks pass")
    if not args.json:
        console.print(
            f"{report.count(Status.passed)} pass, {report.count(Status.warn)} warn, "
            f"{report.count(Status.fail)} fail, {report.count(Status.skip)} skipped"
        )
    if any(r.check == "credentials-work" and r.status is Status.fail for r in report.rows):
        return EXIT_AWS  # nothing else could be checked
    return EXIT_FAILED if report.failed else EXIT_OK
