"""Trainer entry point (one process per rank; see ``trainer/run/launch.py`` for the launcher).

    torchrun --nnodes N --nproc-per-node G [--max-restarts R] -m trainer.train --config FILE [--set k=v ...]

Exit codes: ``trainer/exitcodes.py`` (0 done, 1 crash, 2 bad input, 3 save failed, 4 store unavailable,
5 preempted but the save failed, 143 preempted after a committed checkpoint). Under plain torchrun every
non-zero code is restarted and torchrun itself exits 1; ``python -m trainer.run.launch`` keeps the contract.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback
from typing import NoReturn

from trainer import exitcodes
from trainer.config import load_config
from trainer.errors import TrainerError
from trainer.run.outcome import write_outcome
from trainer.training.loop import Trainer


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load and validate the config, then train; returns the exit code."""
    ap = argparse.ArgumentParser(prog="trainer.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="TOML config file (see trainer/configs/)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--debug", action="store_true", help="show tracebacks for expected errors too")
    args = ap.parse_args(argv)
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(
        level=logging.INFO,
        format=f"[rank{rank}] %(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        trainer = Trainer(load_config(args.config, args.overrides))
        code = trainer.run()
    except TrainerError as exc:
        if args.debug:
            raise
        # Every rank raises the same agreed error; one line per node is enough.
        if os.environ.get("LOCAL_RANK", "0") == "0":
            print(f"error: {exc}", file=sys.stderr)
        _exit_now(exc.code, str(exc))
    except Exception as exc:
        # A peer died or storage failed mid-collective: report and exit at once. A normal close() would wait
        # for checkpoint threads that may be blocked in a collective with the dead peer, and the launcher
        # would only SIGKILL us after its shutdown timeout, delaying the elastic restart.
        traceback.print_exc()
        _exit_now(exitcodes.CRASH, f"{type(exc).__name__}: {exc}")
    # The outcome first: closing waits (boundedly) for run-record writes, which may outlast the launcher's
    # shutdown window on a store that hangs; the code must not depend on them
    # (trainer/checkpoint/sidewrites.py).
    write_outcome(code, trainer.exit_message or exitcodes.name(code))
    trainer.close()
    return code


def _exit_now(code: int, message: str) -> NoReturn:
    write_outcome(code, message)
    sys.stderr.flush()
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
