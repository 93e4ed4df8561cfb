"""Trainer entry point (one process per rank; see ``trainer/launch.py`` for the launcher).

    torchrun --nnodes N --nproc-per-node G [--max-restarts R] -m trainer.train --config FILE [--set k=v ...]

Exit codes (``trainer/exitcodes.py``): 0 done; 2 configuration error; 3 checkpoint save failed
(``on_save_failure=stop`` or the final save); 143 stopped after SIGTERM with a checkpoint written (non-zero
so that torchrun / the Job controller do not mistake a preempted run for a finished one).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from trainer import exitcodes
from trainer.config import ConfigError, load_config
from trainer.loop import Trainer


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, load and validate the config, then train."""
    ap = argparse.ArgumentParser(prog="trainer.train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--config", help="TOML config file (see trainer/configs/)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE")
    ap.add_argument("--debug", action="store_true", help="show tracebacks for configuration errors")
    args = ap.parse_args(argv)
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(
        level=logging.INFO,
        format=f"[rank{rank}] %(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        cfg = load_config(args.config, args.overrides)
        trainer = Trainer(cfg)
    except ConfigError as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return exitcodes.BAD_INPUT
    try:
        code = trainer.run()
    except Exception:
        # A peer died or storage failed mid-collective: report and exit at once. A normal close() would wait
        # for checkpoint threads that may be blocked in a collective with the dead peer, and torchrun would
        # only SIGKILL us after its shutdown timeout, delaying the elastic restart.
        traceback.print_exc()
        sys.stderr.flush()
        sys.stdout.flush()
        os._exit(1)
    trainer.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
