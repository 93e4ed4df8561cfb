"""``aiplat plan``: run the Pulumi program offline under mocks and write ``build/plan/<stack>.json``."""

from __future__ import annotations

import argparse
import time
from collections.abc import Mapping, Sequence
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
from infra.core.errors import ConfigErrors, PlatformError
from infra.io.stackfiles import display_path, list_stacks, stack_file

if TYPE_CHECKING:  # the runner imports the Pulumi SDK: only when a command plans
    from infra.plan.runner import Plan
    from infra.rules import Finding

DEFAULT_OUT = Path("build/plan")
FIRST_PREVIEW_OUT = Path("build/plan-first-preview")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="run the Pulumi program offline under mocks and write build/plan/<stack>.json",
        description="Render every resource the program would declare, offline (Pulumi mocks, AWS data "
        "from the snapshot bundled in moto), and print a line per stack. The names of the other stacks of "
        "the folder come from their last plan (build/plan-cache, while their files and the code match) or "
        "they are planned too: a stack that would create a name another one creates is refused. Exit 2 on an "
        "invalid stack config or a clashing name, 3 on a data call the offline data cannot answer.",
    )
    add_stack_selection(p)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default build/plan)")
    detail = p.add_mutually_exclusive_group()
    detail.add_argument(
        "--counts", action="store_true", help="also print the count by type and the stack outputs"
    )
    detail.add_argument(
        "--tree", action="store_true", help="also print the resource tree, the counts and the outputs"
    )
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


def folder_plans(planned: Mapping[str, Plan], args: argparse.Namespace, console: Console) -> dict[str, Plan]:
    """``planned`` and the plans of the other stacks of ``args.stacks_dir`` (the summary of their last plan
    where it still matches, ``infra/plan/summaries.py``); a neighbour that does not plan is left out (its
    own plan says why)."""
    from infra.plan.runner import neighbour_plan

    plans = dict(planned)
    for stack in list_stacks(args.stacks_dir):
        if stack in plans:
            continue
        try:
            with console.status(f"planning {stack} for the names it uses ..."):
                plans[stack] = neighbour_plan(stack, args.stacks_dir)
        except PlatformError:
            continue
    return plans


def refuse_name_clashes(
    planned: Mapping[str, Plan], args: argparse.Namespace, console: Console, err: Console
) -> set[str]:
    """The stacks of ``planned`` that declare a physical name another stack of the folder declares (their
    errors printed, one line per other stack and field). ``aiplat plan`` and ``review`` refuse them."""
    from infra.plan.names import name_clashes

    if not planned:
        return set()
    plans = folder_plans(planned, args, console)
    refused = set()
    for stack in planned:
        clashes = name_clashes(stack, plans)
        if clashes:
            source = display_path(stack_file(stack, args.stacks_dir))
            print_error(
                err,
                stack,
                ConfigErrors([f.as_config_error() for f in clashes]).with_source(source),
                debug=False,
            )
            refused.add(stack)
    return refused


def print_findings(err: Console, findings: Mapping[str, Sequence[Finding]]) -> None:
    """Each distinct warning once, naming every stack that has it (stack -> its findings)."""
    stacks_of: dict[str, list[str]] = {}
    for stack, found in findings.items():
        for f in found:
            stacks = stacks_of.setdefault(f.one_line(), [])
            if stack not in stacks:
                stacks.append(stack)
    for line, stacks in stacks_of.items():
        print_warning(err, ", ".join(stacks), line)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.plan.render import print_plan, print_summary
    from infra.plan.runner import write_plan

    stacks = selected_stacks(args)
    if not stacks:
        err.print("no stacks found", style="red")
        return EXIT_CONFIG
    out = FIRST_PREVIEW_OUT if args.first_preview and args.out == DEFAULT_OUT else args.out
    failed = 0
    planned: dict[str, Plan] = {}
    seconds: dict[str, float] = {}
    for stack in stacks:
        started = time.perf_counter()
        plan, code = plan_stack(stack, args, console, err, first_preview=args.first_preview)
        seconds[stack] = time.perf_counter() - started
        if plan is None:
            failed = failed or code
        else:
            planned[stack] = plan
    refused = refuse_name_clashes(planned, args, console, err)
    for stack in stacks:
        if stack in refused:
            failed = failed or EXIT_CONFIG
        if stack not in planned or stack in refused:
            # a stale plan for this stack must not survive a failed one
            (out / f"{stack}.json").unlink(missing_ok=True)
    kept = {s: p for s, p in planned.items() if s not in refused}
    # the same warning (an add-on build every stack uses) once per run, not once per stack
    print_findings(err, {s: p.findings for s, p in kept.items()})
    for stack, plan in kept.items():
        path = write_plan(plan, out)
        if args.tree or args.counts:
            print_plan(plan, console, tree=args.tree)
        print_summary(plan, console, path=path, seconds=seconds[stack])
    return failed
