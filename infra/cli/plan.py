"""``aiplat plan``: run the Pulumi program offline under mocks and write ``build/plan/<stack>.json``."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from infra.cli.common import (
    EXIT_CONFIG,
    EXIT_OK,
    add_stack_selection,
    print_error,
    print_warning,
    selected_stacks,
)
from infra.io.stackfiles import display_path, stack_file
from infra.model.errors import ConfigErrors, PlatformError

if TYPE_CHECKING:  # the runner imports the Pulumi SDK: only when a command plans
    from infra.plan.runner import Plan

DEFAULT_OUT = Path("build/plan")
FIRST_PREVIEW_OUT = Path("build/plan-first-preview")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="run the Pulumi program offline under mocks and write build/plan/<stack>.json",
        description="Render every resource the program would declare, offline (Pulumi mocks, AWS data "
        "from the snapshot bundled in moto). Exit 2 on an invalid stack config, 3 on a data call the "
        "offline data cannot answer.",
    )
    add_stack_selection(p)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default build/plan)")
    p.add_argument("--no-tree", action="store_true", help="print only the counts, not the resource tree")
    p.add_argument(
        "--first-preview",
        action="store_true",
        help="record what the first `pulumi preview` of a new stack sends (every output of a resource not "
        "yet created unknown), default out build/plan-first-preview; review it with `aiplat review --plan`",
    )
    p.set_defaults(run=run)


def plan_stack(
    stack: str, args: argparse.Namespace, console: Console, err: Console, *, first_preview: bool = False
) -> tuple[Plan | None, int]:
    """The plan of ``stack`` in ``args.stacks_dir`` and EXIT_OK, or None and the exit code of why not
    (printed, one line per problem, attributed to the stack file). ``aiplat plan`` and ``review`` plan so."""
    from infra.plan.runner import run_plan, stack_file_plan

    try:
        with console.status(f"planning {stack} ..."):
            if first_preview:
                return run_plan(stack, stacks_dir=args.stacks_dir, first_preview=True), EXIT_OK
            # once per run: a source stack another stack's StackReference planned is not planned again
            return stack_file_plan(stack, args.stacks_dir), EXIT_OK
    except PlatformError as exc:
        if isinstance(exc, ConfigErrors):
            exc = exc.with_source(display_path(stack_file(stack, args.stacks_dir)))
        print_error(err, stack, exc, debug=args.debug)
        return None, exc.exit_code


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.plan.render import print_plan
    from infra.plan.runner import write_plan

    stacks = selected_stacks(args)
    if not stacks:
        err.print("no stacks found", style="red")
        return EXIT_CONFIG
    out = FIRST_PREVIEW_OUT if args.first_preview and args.out == DEFAULT_OUT else args.out
    failed = 0
    for stack in stacks:
        started = time.perf_counter()
        plan, code = plan_stack(stack, args, console, err, first_preview=args.first_preview)
        if plan is None:
            failed = failed or code
            # a stale plan for this stack must not survive a failed one
            (out / f"{stack}.json").unlink(missing_ok=True)
            continue
        for finding in plan.findings:
            print_warning(err, stack, finding.one_line())
        print_plan(plan, console, tree=not args.no_tree)
        path = write_plan(plan, out)
        console.print(f"wrote {path} ({len(plan.resources)} resources, {time.perf_counter() - started:.1f}s)")
    return failed
