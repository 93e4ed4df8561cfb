"""``aiplat``: the platform's command line.

Parse, then load and validate, then act. Each command is a module of this package with ``add_parser``
(its arguments, a help line and a description) and ``run`` (what it does); this module only dispatches.
User errors print one line per problem and no traceback (``--debug`` shows it); an error no command expected
is a bug and says so. Exit codes are listed in ``infra/cli/common.py`` (``EXIT_CODES``), ``aiplat --help``
and the docs site's exit-code page (``aiplat docs --write``).
"""

from __future__ import annotations

import argparse
import sys

from infra.cli import (
    addon_versions,
    bootstrap,
    check_storage,
    config_reference,
    cost,
    docs,
    facts,
    images,
    plan,
    preflight,
    prices,
    release,
    review,
    rollout,
    train,
)
from infra.cli.common import (
    EXIT_INTERRUPTED,
    add_global_flags,
    consoles,
    exit_code,
    exit_codes_epilog,
    print_error,
    user_error,
    version,
)
from infra.core.errors import PlatformError

COMMANDS = (
    plan,
    review,
    preflight,
    bootstrap,
    images,
    cost,
    rollout,
    check_storage,
    config_reference,
    docs,
    train,
    addon_versions,
    facts,
    prices,
    release,
)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aiplat",
        description="GPU training and inference platform on AWS (Pulumi): plan offline, review with the "
        "policy pack, check the account, estimate the cost, roll out region by region. "
        "`aiplat <command> --help` for each command.",
        epilog=exit_codes_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"aiplat {version()}")
    sub = p.add_subparsers(dest="command", required=True, metavar="<command>")
    for command in COMMANDS:
        command.add_parser(sub)
    add_global_flags(p)
    # `aiplat docs` renders every command's --help: the root parser reaches it through the arguments
    p.set_defaults(root_parser=p)
    return p


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The arguments; a command that runs the user's own program (``train run-local``) gets the ones it
    does not know as ``extra``, every other command refuses them (argparse's error, exit 2)."""
    p = parser()
    args, extra = p.parse_known_args(argv)
    if extra and not getattr(args, "passthrough", False):
        p.parse_args(argv)
    args.extra = extra[1:] if extra[:1] == ["--"] else extra
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    console, err = consoles()
    try:
        return args.run(args, console, err)
    except KeyboardInterrupt:
        err.print("interrupted", style="yellow")
        return EXIT_INTERRUPTED
    except PlatformError as exc:  # a user error a command did not catch itself: one line per problem
        print_error(err, None, exc, debug=args.debug)
        return exit_code(exc)
    except Exception as exc:  # a bug: say so, the traceback with --debug
        if (user := user_error(exc)) is not None:
            print_error(err, None, user, debug=args.debug)
            return exit_code(user)
        print_error(err, None, exc, debug=args.debug)
        if not args.debug:
            err.print(
                f"error: unexpected {type(exc).__name__}; this is a bug: run again with --debug for the "
                "traceback",
                style="red",
                markup=False,
            )
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
