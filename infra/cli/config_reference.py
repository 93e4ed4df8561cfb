"""``aiplat config-reference``: the stack config reference generated from the schema
(``docs/reference/config.md``; ``aiplat docs --write`` writes it with the site's other generated pages)."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from infra.cli.common import EXIT_FAILED, EXIT_OK
from infra.schema.reference import config_reference


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "config-reference",
        help="print the stack config reference generated from the schema",
        description="Print the reference, write it (--write docs/reference/config.md), or exit 1 when a file "
        "is not what the schema generates (--check docs/reference/config.md).",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument("--write", type=Path, metavar="FILE", help="write the reference to FILE")
    which.add_argument("--check", type=Path, metavar="FILE", help="exit 1 if FILE is stale")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, console: Console, err: Console) -> int:
    text = config_reference()
    if args.write:
        args.write.parent.mkdir(parents=True, exist_ok=True)
        args.write.write_text(text)
        console.print(f"wrote {args.write}")
        return EXIT_OK
    if args.check:
        current = args.check.read_text() if args.check.exists() else ""
        if current != text:
            err.print(
                f"error: {args.check} is stale; fix: run `aiplat config-reference --write {args.check}`",
                style="red",
                markup=False,
            )
            return EXIT_FAILED
        console.print(f"{args.check} is current")
        return EXIT_OK
    console.print(text, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK
