"""``aiplat images``: the charts' images of the stacks (``list``), their digests read from the registry
(``resolve``), and the copy into the stack's ECR of the images no pull through cache rule takes
(``copy``)."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infra.cli.common import (
    EXIT_AWS,
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_TOOL,
    add_stack_selection,
    print_error,
    selected_stacks,
)
from infra.core.errors import ConfigErrors

DOC = "docs/how-to/image-cache.md"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "images",
        help="the charts' images: list them, read their digests from the registry, copy the uncached ones",
        description="Every image of every chart the stacks install, where it is pulled from in the stack's "
        "ECR (through a pull through cache rule, or the copy area for registries no rule takes) and its "
        f"digest. Needs crane (go-containerregistry) for resolve and copy. {DOC}",
    )
    cmds = p.add_subparsers(dest="images_command", required=True, metavar="<images command>")

    ls = cmds.add_parser(
        "list",
        help="each image, where it comes from and its digest (offline)",
        description="Offline: each image of the stacks' charts, cached or copied, and its recorded digest. "
        "Exit 1 when an image has no digest (aiplat preflight refuses such a stack), 2 for a config error.",
    )
    add_stack_selection(ls)
    ls.set_defaults(run=run_list)

    rs = cmds.add_parser(
        "resolve",
        help="read the missing digests from the registries and record them in infra/mirror/digests.py",
        description="Runs `crane digest <image>:<tag>` for every image of the stacks' charts that has no "
        "digest recorded (with --check, for every image: a recorded digest the registry contradicts is "
        "replaced by the registry's and reported) and writes infra/mirror/digests.py, each digest with "
        "its source and the date. Public registries need no sign-in; EKS's own registry needs `aws ecr "
        "get-login-password --region us-west-2 | crane auth login 602401143452.dkr.ecr.us-west-2."
        "amazonaws.com -u AWS --password-stdin`. Exit 0 when every image has its digest and none "
        "differed, 1 when a read failed or a recorded digest differed, 4 when crane is missing.",
    )
    add_stack_selection(rs)
    rs.add_argument("--check", action="store_true", help="also compare the recorded digests")
    rs.add_argument("--dry-run", action="store_true", help="print what it reads, write nothing")
    rs.add_argument(
        "--digests-file", type=Path, default=None, help="write there instead of infra/mirror/digests.py"
    )
    rs.set_defaults(run=run_resolve)

    cp = cmds.add_parser(
        "copy",
        help="copy the images of registries no cache rule takes into the stack's ECR, by digest",
        description="For each stack: signs crane in to the stack's ECR registry (and to an ECR source, "
        "such as EKS's) with your AWS credentials, then copies every image of the copy area that is not "
        "there yet with `crane copy <image>@<digest> <registry>/<prefix>/copy/<image>:<tag>` and reads "
        "the digest back. Run it after the first `pulumi up` has created the copy area's creation "
        "template (or with `pulumi up --target` on it) and before the charts are installed; `aiplat "
        "preflight` refuses a stack whose copies are missing. Needs ecr:GetAuthorizationToken, "
        "ecr:CreateRepository and the push actions on '<prefix>/copy/*'. Exit 0 when every image is "
        "there, 1 when one could not be copied (or has no digest yet), 4 when crane is missing, 6 when "
        "the credentials do not work.",
    )
    add_stack_selection(cp)
    cp.set_defaults(run=run_copy)


def _configs(args: argparse.Namespace, err: Console):
    from infra.io.stackfiles import load_stack_config

    try:
        return [(s, load_stack_config(s, args.stacks_dir)) for s in selected_stacks(args)]
    except ConfigErrors as exc:
        print_error(err, None, exc, debug=args.debug)
        return None


def run_list(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.mirror.documents import placement
    from infra.mirror.rules import layout, stack_gaps, stack_pins

    stacks = _configs(args, err)
    if stacks is None:
        return EXIT_CONFIG
    missing = False
    for stack, cfg in stacks:
        table = Table(title=f"{stack}: images of its charts", title_justify="left")
        for col in ("chart", "values", "upstream", "from", "digest"):
            table.add_column(col, overflow="fold")
        cache = layout(cfg)
        for pin in stack_pins(cfg):
            where = placement(cache, pin.image)
            table.add_row(
                pin.chart,
                pin.values,
                f"{pin.image}:{pin.tag}",
                f"{where.kind.value}: {where.repository}",
                pin.digest or "[bold red]none[/]",
            )
        console.print(table)
        for path, gap in stack_gaps(cfg):
            missing = True
            err.print(f"{stack}: {path}: {gap.values or gap.chart}: {gap.why}", markup=False)
    return EXIT_FAILED if missing else EXIT_OK


def run_resolve(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.io.crane import CraneMissing, crane_runner, crane_version
    from infra.ops.images import DIGESTS_FILE, Outcome, merged, render_digests, resolve, selected_pins

    stacks = _configs(args, err)
    if stacks is None:
        return EXIT_CONFIG
    crane = crane_runner()
    try:
        version = crane_version(crane)
    except CraneMissing as exc:
        print_error(err, None, exc, debug=args.debug)
        return EXIT_TOOL
    pins = selected_pins(cfg for _, cfg in stacks)
    outcomes, new = resolve(pins, crane, check=args.check, version=version, today=datetime.date.today())
    for r in outcomes:
        line = f"{r.pin.image}:{r.pin.tag}: {r.outcome.value}" + (f" {r.digest}" if r.digest else "")
        console.print(line + (f" ({r.detail})" if r.detail else ""), markup=False, highlight=False)
    if not outcomes:
        console.print("every image of these stacks has its digest recorded (--check compares them)")
    if new and not args.dry_run:
        path = args.digests_file or DIGESTS_FILE
        path.write_text(render_digests(merged(new)))
        console.print(f"wrote {len(new)} digest(s) to {path}")
    bad = [r for r in outcomes if r.outcome in (Outcome.failed, Outcome.differs)]
    return EXIT_FAILED if bad else EXIT_OK


def run_copy(args: argparse.Namespace, console: Console, err: Console) -> int:
    from botocore.exceptions import BotoCoreError, ClientError

    from infra.io.aws_credentials import AwsCredentialsError, require_credentials
    from infra.io.aws_live import boto3_clients, home_region
    from infra.io.crane import CraneError, CraneMissing, crane_runner, crane_version, ecr_login, ecr_region
    from infra.jobs.rules import stack_registry
    from infra.keys.rules import account_findings
    from infra.mirror.documents import Placement, placement
    from infra.mirror.rules import layout, stack_pins
    from infra.ops.images import CopyOutcome, copy_images

    stacks = _configs(args, err)
    if stacks is None:
        return EXIT_CONFIG
    crane = crane_runner()
    try:
        crane_version(crane)
    except CraneMissing as exc:
        print_error(err, None, exc, debug=args.debug)
        return EXIT_TOOL
    clients = boto3_clients()
    failed = False
    for stack, cfg in stacks:
        try:
            who = require_credentials(clients("sts", home_region(cfg.region)))
        except AwsCredentialsError as exc:
            print_error(err, stack, exc, debug=args.debug)
            return EXIT_AWS
        wrong = account_findings(cfg, who.account)
        for finding in wrong:
            print_error(err, stack, ValueError(finding.one_line()), debug=False)
        if wrong:
            failed = True
            continue
        cache = layout(cfg, stack_registry(cfg, who.account))
        pins = stack_pins(cfg)
        copied = [p for p in pins if placement(cache, p.image).kind is Placement.copied]
        sources = {p.image.split("/", 1)[0] for p in copied}
        hosts = {cache.registry} | {host for host in sources if ecr_region(host)}
        try:
            for host in sorted(hosts):
                ecr_login(crane, clients("ecr", ecr_region(host) or cfg.region), host)
        except (BotoCoreError, ClientError, CraneError) as exc:
            print_error(err, stack, ValueError(f"signing crane in to ECR failed: {exc}"), debug=args.debug)
            return EXIT_AWS
        for c in copy_images(pins, cache, crane):
            console.print(
                f"{stack}: {c.pin.image}:{c.pin.tag} -> {c.target}: {c.outcome.value}"
                + (f" ({c.detail})" if c.detail else ""),
                markup=False,
                highlight=False,
            )
            failed |= c.outcome not in (CopyOutcome.present, CopyOutcome.copied)
    return EXIT_FAILED if failed else EXIT_OK
