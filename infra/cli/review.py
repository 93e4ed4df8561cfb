"""``aiplat review``: the policy pack's verdict on a stack's offline plan, as ``pulumi preview --policy-pack
policies`` would give it, without cloud credentials (pull requests, ``make plan``)."""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from infra.cli.common import EXIT_CONFIG, EXIT_OK, EXIT_POLICY, print_error
from infra.cli.plan import plan_stack, print_findings, refuse_name_clashes
from infra.core.errors import PlatformError
from infra.io.policypack import default_pack_dir, read_json, read_pack_project, read_plan
from infra.io.stackfiles import list_stacks

STYLE = {"critical": "bold red", "high": "red", "medium": "yellow", "low": "cyan", "unspecified": "white"}


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "review",
        help="review stacks' offline plans with the policy pack (policies/)",
        description="Run the CrossGuard policy pack against the offline plan of each stack through the "
        "analyzer calls the Pulumi engine makes during a preview (Analyze per resource, AnalyzeStack). "
        "Prints one row per policy with the count and a few examples (--verbose: every violation); "
        "exit 5 on any mandatory violation, 2 on an invalid stack config (or a name another stack of the "
        "folder uses), plan file or pack config.",
    )
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", "-s", action="append", help="stack to plan and review (repeatable)")
    which.add_argument("--all", action="store_true", help="every stack in the stacks folder")
    which.add_argument(
        "--plan",
        action="append",
        type=Path,
        help="a saved plan (build/plan/<stack>.json) to review (repeatable)",
    )
    p.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default: stacks/)")
    p.add_argument("--policy-pack", type=Path, default=None, help="the pack's folder (default: policies/)")
    p.add_argument(
        "--policy-pack-config",
        type=Path,
        default=None,
        help="a pack config JSON file for every stack reviewed, as for pulumi preview (default: each stack's "
        "own, <stacks-dir>/policy-pack/<stack>.json, where it has one)",
    )
    p.add_argument(
        "--pack-python",
        type=Path,
        default=None,
        help="run the pack as its own process with this Python (e.g. policies/venv/bin/python), as the "
        "Pulumi CLI does; default: in this process",
    )
    p.add_argument(
        "--verbose", "-v", action="store_true", help="every violation on its own row, not one row per policy"
    )
    p.add_argument(
        "--json", action="store_true", help="print one JSON document: each stack's verdict and violations"
    )
    p.set_defaults(run=run)


def _plans(args: argparse.Namespace, err: Console, console: Console) -> tuple[list[dict], int]:
    """The plans to review (planning stacks as needed) and the exit code of what could not be planned."""
    if args.plan:
        return [read_plan(path) for path in args.plan], EXIT_OK
    stacks = list_stacks(args.stacks_dir) if args.all else list(args.stack)
    planned, failed = {}, EXIT_OK
    for stack in stacks:
        plan, code = plan_stack(stack, args, console, err)
        if plan is None:
            failed = failed or code
        else:
            planned[stack] = plan
    # what aiplat plan refuses is not reviewed: a stack whose names another stack of the folder uses
    refused = refuse_name_clashes(planned, args, console, err)
    kept = {s: p for s, p in planned.items() if s not in refused}
    print_findings(err, {s: p.findings for s, p in kept.items()})
    plans = [p.as_json() for p in kept.values()]
    failed = failed or (EXIT_CONFIG if refused else EXIT_OK)
    if not stacks:
        err.print("no stacks found", style="red")
        failed = EXIT_CONFIG
    return plans, failed


EXAMPLES = 3  # resources and messages a policy's row quotes without --verbose


def _examples(items: list[str]) -> str:
    """The first few items, one per line, and how many more there are."""
    shown = "\n".join(items[:EXAMPLES])
    more = len(items) - EXAMPLES
    return f"{shown}\n+{more} more (--verbose)" if more > 0 else shown


def print_review(review, console: Console, *, verbose: bool = False) -> None:  # noqa: ANN001 (StackReview)
    """The verdict, then a table per severity: one row per policy with the count, a few resources and its
    distinct messages; ``verbose``: one row per violation."""
    verdict = "[green]passes[/]" if review.passed else "[bold red]fails[/]"
    console.print(
        f"[bold]{review.stack}[/]: {verdict} {review.pack}@{review.version}: "
        f"{len(review.mandatory)} mandatory, {len(review.advisory)} advisory violations "
        f"({review.policies} policies, {review.resources} resources)"
    )
    for severity, groups in review.by_policy().items():
        total = sum(g.count for g in groups)
        table = Table(title=f"{severity} ({total})", title_style=STYLE.get(severity, ""), expand=True)
        table.add_column("level", no_wrap=True)
        table.add_column("policy", no_wrap=True)
        if not verbose:
            table.add_column("count", justify="right", no_wrap=True)
        table.add_column("resource", overflow="fold", max_width=36)
        table.add_column("message", overflow="fold", ratio=1)
        for g in groups:
            level = "[bold red]mandatory[/]" if g.mandatory else "advisory"
            if verbose:
                for d in g.diagnostics:
                    table.add_row(level, d.policy, d.resource or "(stack)", d.message)
            else:
                table.add_row(
                    level, g.policy, str(g.count), _examples(g.resources()), _examples(g.messages())
                )
        console.print(table)


def as_json(review) -> dict:  # noqa: ANN001 (StackReview)
    """One stack's verdict as data (``--json``)."""
    return {
        "stack": review.stack,
        "passed": review.passed,
        "pack": review.pack,
        "version": review.version,
        "policies": review.policies,
        "resources": review.resources,
        "violations": [asdict(d) for d in review.diagnostics],
    }


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.review import review_configured_plan, review_plan

    out = console
    if args.json:
        console = err  # progress and tables to stderr; stdout holds the one JSON document

    try:
        project = read_pack_project(args.policy_pack or default_pack_dir())
        given = read_json(args.policy_pack_config, "policy pack config") if args.policy_pack_config else None
        plans, status = _plans(args, err, console)
    except PlatformError as exc:
        print_error(err, None, exc, debug=args.debug)
        return exc.exit_code
    reviews = []
    for plan in plans:
        started = time.perf_counter()
        try:
            options = {"pack": project, "pack_python": args.pack_python}
            # the file given applies to every stack, as one --policy-pack-config does for pulumi preview
            review = (
                review_plan(plan, pack_config=given, **options)
                if args.policy_pack_config
                else review_configured_plan(plan, stacks_dir=args.stacks_dir, **options)
            )
        except PlatformError as exc:
            print_error(err, str(plan.get("stack")), exc, debug=args.debug)
            status = status or exc.exit_code
            continue
        reviews.append(review)
        if not args.json:
            print_review(review, console, verbose=args.verbose)
        console.print(f"reviewed {review.stack} in {time.perf_counter() - started:.1f}s\n")
    if args.json:
        out.out(json.dumps({"reviews": [as_json(r) for r in reviews]}, indent=1), highlight=False)
    elif len(reviews) > 1:
        summary = Table(title="policy review")
        for column in ("stack", "mandatory", "advisory", "verdict"):
            summary.add_column(column)
        for r in reviews:
            summary.add_row(
                r.stack, str(len(r.mandatory)), str(len(r.advisory)), "pass" if r.passed else "FAIL"
            )
        console.print(summary)
    if any(not r.passed for r in reviews):
        return status or EXIT_POLICY
    return status
