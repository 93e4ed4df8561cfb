"""What every command shares: consoles, error lines without tracebacks, stack selection."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from rich.console import Console

from infra.core.errors import PlatformError, ToolMissingError
from infra.io.stackfiles import list_stacks

# Exit codes every command uses (docs/reference/exit-codes.md, generated); each means one thing
# across commands.
EXIT_OK = 0
EXIT_FAILED = 1  # a check failed (check-storage, preflight), a stack failed to deploy or its health gate
EXIT_CONFIG = 2  # a stack config or rollout.yaml is invalid, or a bad argument (argparse uses 2 too)
EXIT_DATA = 3  # a data call the offline AWS data cannot answer
EXIT_TOOL = 4  # a required tool is missing (the Pulumi CLI)
EXIT_POLICY = 5  # a mandatory policy violation (review) stopped the rollout or failed the review
EXIT_AWS = 6  # AWS could not be reached, or the credentials are missing, expired or refused
EXIT_CLUSTER = 7  # the cluster's Kubernetes API did not answer or refused the caller (aiplat train jobs)
EXIT_TEAM = 8  # a team the stack does not declare
EXIT_NAME_TAKEN = 9  # a TrainJob of that name already exists (HTTP 409)
EXIT_NO_FLAVOR = 10  # a job no quota of its team can ever admit
EXIT_NO_JOB = 11  # no TrainJob of that name
EXIT_AWS_DENIED = 12  # the credentials work, but AWS denied one API call (AccessDenied): a permission to add
EXIT_INTERNAL = 70  # a bug: an error no command expected (sysexits EX_SOFTWARE); --debug shows the traceback
EXIT_INTERRUPTED = 130  # Ctrl-C

EXIT_CODES = {
    EXIT_OK: "success",
    EXIT_FAILED: "a check failed, or a stack failed to deploy or its health gate",
    EXIT_CONFIG: "invalid stack config, rollout.yaml or argument",
    EXIT_DATA: "a data call the offline AWS data cannot answer (plan)",
    EXIT_TOOL: "a required tool is missing (the Pulumi CLI)",
    EXIT_POLICY: "a mandatory policy violation: aiplat review failed, or it stopped the rollout",
    EXIT_AWS: "AWS could not be reached, or the credentials are missing, expired or refused",
    EXIT_CLUSTER: "the cluster's Kubernetes API did not answer or refused the caller (train submit/list/logs/"
    "cancel)",
    EXIT_TEAM: "a team the stack does not declare (train submit/list)",
    EXIT_NAME_TAKEN: "a TrainJob of that name already exists in the team's namespace (train submit)",
    EXIT_NO_FLAVOR: "the job fits no flavor: more GPUs than the team's quota can ever admit (train submit)",
    EXIT_NO_JOB: "no TrainJob of that name (train logs/cancel)",
    EXIT_AWS_DENIED: "AWS denied an API call (AccessDenied): the message names the action to allow",
    EXIT_INTERNAL: "an unexpected error (a bug); run with --debug for the traceback",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
}


def consoles() -> tuple[Console, Console]:
    """stdout and stderr consoles; wide when piped (CI logs, tests), where rich would wrap at 80 columns.
    ``COLUMNS`` sets the width of piped output."""
    piped = int(os.environ.get("COLUMNS") or 140)
    out = Console(width=None if sys.stdout.isatty() else piped)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else max(piped, 400))
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
    """A user error's own code; anything else is a bug (``EXIT_INTERNAL``)."""
    return exc.exit_code if isinstance(exc, PlatformError) else EXIT_INTERNAL


def exit_codes_epilog() -> str:
    """The exit-code table for ``aiplat --help``."""
    return "exit codes:\n" + "\n".join(f"  {code:>3}  {meaning}" for code, meaning in EXIT_CODES.items())


DEBUG_HELP = "show tracebacks for errors (before or after the command)"


def add_global_flags(parser: argparse.ArgumentParser) -> None:
    """``--debug`` on the top parser and on every command and subcommand, so it may come before or after
    the command. A command's copy defaults to SUPPRESS: absent there, it leaves the top parser's value."""
    parser.add_argument("--debug", action="store_true", help=DEBUG_HELP)
    _add_to_commands(parser)


def _add_to_commands(parser: argparse.ArgumentParser) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):  # aliases share one parser
                command.add_argument(
                    "--debug", action="store_true", default=argparse.SUPPRESS, help=DEBUG_HELP
                )
                _add_to_commands(command)


def version() -> str:
    """The installed package's version (``pyproject.toml`` ``project.version``)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("aiplat")
    except PackageNotFoundError:  # run from a source tree that was never installed
        import tomllib

        pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
        return str(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["version"])


OWN_PACKAGES = ("infra", "trainer", "inference")  # a module of ours missing is a bug, not the install


def user_error(exc: BaseException) -> PlatformError | None:
    """An exception no command caught that is still the user's to fix, not a bug: missing, expired or
    refused AWS credentials, an AWS endpoint that does not answer, or a denied API call, from any command
    that calls AWS (one message and one exit code everywhere); a package of the install missing."""
    if isinstance(exc, ModuleNotFoundError) and exc.name and exc.name.split(".")[0] not in OWN_PACKAGES:
        return ToolMissingError(
            f"the Python package {exc.name!r} is not installed in this environment ({sys.prefix}); fix: "
            "install the project with its dependencies (`pip install -e .` in the checkout, or `make plan`)"
        )
    if "botocore" not in sys.modules:  # nothing called AWS
        return None
    from infra.io.aws_credentials import aws_error

    return aws_error(exc)
