"""What every command shares: consoles, error lines without tracebacks, stack selection."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

from infra.io.stackfiles import list_stacks
from infra.model.errors import PlatformError

# Exit codes every command uses (README "Command line").
EXIT_OK = 0
EXIT_FAILED = 1  # a check failed (check-storage), or an unexpected error
EXIT_CONFIG = 2  # the stack config is invalid, or a bad argument
EXIT_DATA = 3  # a data call the offline AWS data cannot answer
EXIT_INTERRUPTED = 130


def consoles() -> tuple[Console, Console]:
    """stdout and stderr consoles; wide when piped (CI logs, tests), where rich would wrap at 80 columns."""
    out = Console(width=None if sys.stdout.isatty() else 140)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 400)
    return out, err


def print_error(err: Console, stack: str | None, exc: BaseException, *, debug: bool) -> None:
    """One ``error: <stack>: <line>`` per line of the error; the traceback only with ``--debug``."""
    if debug:
        err.print_exception()
    where = f"{stack}: " if stack else ""
    for line in str(exc).splitlines():
        err.print(f"error: {where}{line}", style="red", markup=False, highlight=False, soft_wrap=True)


def print_warning(err: Console, stack: str, line: str) -> None:
    err.print(f"warning: {stack}: {line}", style="yellow", markup=False, highlight=False, soft_wrap=True)


def add_stack_selection(parser: argparse.ArgumentParser, *, many: bool = True) -> None:
    """``--stack NAME`` (repeatable when ``many``) or ``--all``, and ``--stacks-dir``."""
    if many:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument(
            "--stack", "-s", action="append", help="stack name (repeatable), e.g. prod-us-train"
        )
        which.add_argument("--all", action="store_true", help="every stack in the stacks folder")
    else:
        parser.add_argument("--stack", "-s", required=True, help="stack name, e.g. prod-us-train")
    parser.add_argument(
        "--stacks-dir", type=Path, default=None, help="folder of stack files (default: the project's stacks/)"
    )


def selected_stacks(args: argparse.Namespace) -> list[str]:
    return list_stacks(args.stacks_dir) if getattr(args, "all", False) else list(args.stack)


def exit_code(exc: BaseException) -> int:
    return exc.exit_code if isinstance(exc, PlatformError) else EXIT_FAILED
