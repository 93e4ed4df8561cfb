"""Publish a model release from a committed checkpoint (see ``trainer/release.py`` for the format).

    python -m trainer.publish --checkpoint URI [--step N] --release-root URI --model-name NAME

``--checkpoint`` is the training run's ``checkpoint.uri`` (or one ``step_XXXXXXXXX`` folder in it);
without ``--step`` the newest committed checkpoint whose files match its manifest is used.
``--release-root`` is the bucket or directory whose ``release/`` prefix the inference regions read.
Prints one JSON line describing the release. Exit codes: 0 published; 2 anything refused or failed
(one line on stderr naming the cause; ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys

from trainer.errors import TrainerError


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(
        prog="trainer.publish", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkpoint", required=True, metavar="URI", help="checkpoint root (checkpoint.uri)")
    ap.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest committed)")
    ap.add_argument("--release-root", required=True, metavar="URI", help="s3://bucket[/prefix] or a dir")
    ap.add_argument("--model-name", required=True, help="release/<model-name>/<version>/")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from trainer.release import publish

    try:
        rel = publish(args.checkpoint, args.step, args.release_root, args.model_name)
    except (TrainerError, OSError) as exc:
        if args.debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(
        json.dumps(
            {
                "published": rel.uri,
                "model_name": rel.model_name,
                "version": rel.version,
                "step": rel.step,
                "source": rel.source.checkpoint_uri,
                "bytes": sum(f.size for f in rel.files.values()),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
