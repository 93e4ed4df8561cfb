"""``aiplat``: the platform's command line.

Parse, then load and validate, then act. User errors print one line per problem and no traceback
(``--debug`` shows it); exit codes: 0 ok, 2 config error, 3 offline data error, 1 anything else.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from rich.console import Console

from infra.config.loader import list_stacks, stack_file
from infra.errors import ConfigErrors, PlatformError

DEFAULT_OUT = Path("build/plan")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aiplat", description="AI training platform on AWS (Pulumi).")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True)
    plan = sub.add_parser(
        "plan", help="run the Pulumi program offline under mocks and write build/plan/<stack>.json"
    )
    which = plan.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", "-s", action="append", help="stack name (repeatable), e.g. prod-us-train")
    which.add_argument("--all", action="store_true", help="every stack under stacks/")
    plan.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default build/plan)")
    plan.add_argument("--stacks-dir", type=Path, default=None, help="folder of stack files (default stacks/)")
    plan.add_argument("--no-tree", action="store_true", help="print only the counts, not the resource tree")
    return parser


def _report(exc: PlatformError, stack: str, args: argparse.Namespace, err: Console) -> None:
    if args.debug:
        err.print_exception()
    for line in str(exc).splitlines():
        err.print(f"error: {stack}: {line}", style="red", markup=False, highlight=False, soft_wrap=True)
    # a stale plan for this stack must not survive a failed one
    (args.out / f"{stack}.json").unlink(missing_ok=True)


def _cmd_plan(args: argparse.Namespace, console: Console, err: Console) -> int:
    from infra.config.loader import load_stack_config
    from infra.plan.render import print_plan
    from infra.plan.runner import run_plan, write_plan

    stacks = list_stacks(args.stacks_dir) if args.all else args.stack
    if not stacks:
        err.print("no stacks found", style="red")
        return 2
    failed = 0
    for stack in stacks:
        started = time.perf_counter()
        try:
            cfg = load_stack_config(stack, args.stacks_dir)
            with console.status(f"planning {stack} ..."):
                plan = run_plan(stack, cfg)
        except ConfigErrors as exc:
            source = str(stack_file(stack, args.stacks_dir))
            exc = ConfigErrors([e if e.source else e.with_source(source) for e in exc.errors])
            failed = failed or exc.exit_code
            _report(exc, stack, args, err)
            continue
        except PlatformError as exc:
            failed = failed or exc.exit_code
            _report(exc, stack, args, err)
            continue
        print_plan(plan, console, tree=not args.no_tree)
        path = write_plan(plan, args.out)
        console.print(f"wrote {path} ({len(plan.resources)} resources, {time.perf_counter() - started:.1f}s)")
    return failed


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # Wide output when piped (CI logs, tests): rich would otherwise wrap type names at 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 140)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 400)
    try:
        if args.command == "plan":
            return _cmd_plan(args, console, err)
    except ConfigErrors as exc:  # pragma: no cover - handled per stack above
        err.print(str(exc), style="red", markup=False)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 1


if __name__ == "__main__":
    sys.exit(main())
