"""``aiplat``: the platform's command line.

Parse, then load and validate, then act. Each command is a module of this package with ``add_parser``
(its arguments) and ``run`` (what it does); this module only dispatches. User errors print one line per
problem and no traceback (``--debug`` shows it). Exit codes: 0 ok, 1 a check failed or an unexpected
error, 2 an invalid stack config or argument, 3 a data call the offline data cannot answer, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys

from infra.cli import check_storage, config_reference, cost, plan, preflight, rollout
from infra.cli.common import EXIT_INTERRUPTED, consoles, exit_code, print_error

COMMANDS = (plan, preflight, cost, rollout, check_storage, config_reference)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="aiplat", description="AI training platform on AWS (Pulumi).")
    p.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    console, err = consoles()
    try:
        return args.run(args, console, err)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug, or an error a command did not expect: one line unless --debug
        print_error(err, None, exc, debug=args.debug)
        return exit_code(exc)


if __name__ == "__main__":
    sys.exit(main())
