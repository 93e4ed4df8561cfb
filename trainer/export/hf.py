"""Convert a committed checkpoint of the bundled trainer into a Hugging Face GPT-2 folder (the tensor and file
mapping: ``trainer/export/gpt2.py``), for ``python -m trainer.release.publish --from`` to check, sign and
publish.

    python -m trainer.export.hf --checkpoint URI [--step N] --output URI

``--checkpoint`` is the training run's ``checkpoint.uri`` (or one ``step_XXXXXXXXX`` folder in it); without
``--step`` the newest committed checkpoint whose files match its manifest is used. ``--output`` is the
folder to write (``config.json``, ``generation_config.json``, ``model.safetensors``, ``tokenizer.json``,
``tokenizer_config.json``): the trainer's output prefix, e.g. ``s3://<checkpoints>/trainer/outputs/<run>/
model/``. It must be empty; every file is created, never replaced, ``config.json`` last (a folder without
it is unfinished and the publisher refuses it).

This step reads the checkpoint (torch.distributed.checkpoint: its ``.metadata`` is a pickle) and runs as
the trainer's own identity, which wrote it: it holds no ``kms:Sign`` and cannot write ``release/``. The
publisher, which can, reads only what this writes, as JSON and safetensors headers. Prints one JSON line.
Exit codes: 0 written; 2 anything refused or failed (one line on stderr; ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainer.config import ConfigError, ModelConfig
from trainer.errors import BadInput, BlobExists, TrainerError
from trainer.export.gpt2 import (
    ByteVocab,
    ReleaseFormatError,
    generation_config,
    hf_config,
    to_hf_tensors,
    tokenizer_config,
    tokenizer_json,
)
from trainer.release.manifest import (
    CONFIG,
    GENERATION_CONFIG,
    RELEASE_PREFIX,
    TOKENIZER,
    TOKENIZER_CONFIG,
    WEIGHTS,
)
from trainer.storage.blobstore import open_blobs


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()


def export(checkpoint_uri: str, step: int | None, output_uri: str) -> dict[str, Any]:
    """Write the model weights of a committed, verified checkpoint (the newest when ``step`` is None) of
    ``checkpoint_uri`` as a GPT-2 folder at ``output_uri``; returns what it wrote (step, run id, files)."""
    from safetensors.torch import save_file

    from trainer.checkpoint.checkpointer import open_committed
    from trainer.training.model import GPT

    for what, uri in (("--checkpoint", checkpoint_uri), ("--output", output_uri)):
        if f"/{RELEASE_PREFIX}/" in f"/{uri.rstrip('/')}/":
            raise BadInput(f"{what}={uri}: not under {RELEASE_PREFIX}/ (only the publisher writes there)")
    out = open_blobs(output_uri)
    if existing := sorted(out.list()):
        raise BadInput(f"--output={output_uri} already holds {existing[:3]}; export into an empty folder")
    ck = open_committed(checkpoint_uri, step)
    try:
        cfg = ModelConfig(**ck.manifest.config["model"])
    except (KeyError, TypeError, ConfigError) as exc:
        raise BadInput(f"{ck.uri}: manifest.json holds no usable model config ({exc})") from None
    tokenizer = (ck.manifest.data or {}).get("tokenizer")
    try:
        vocab = ByteVocab.from_index(tokenizer, cfg.vocab_size)
        tensors = to_hf_tensors(ck.load_model_weights(GPT(cfg)), cfg, vocab)
    except ReleaseFormatError as exc:
        raise BadInput(f"{ck.uri}: cannot export as GPT-2: {exc}") from None
    documents = {
        GENERATION_CONFIG: _json_bytes(generation_config(vocab)),
        TOKENIZER: _json_bytes(tokenizer_json(vocab)),
        TOKENIZER_CONFIG: _json_bytes(tokenizer_config(vocab, cfg.seq_len)),
        CONFIG: _json_bytes(hf_config(cfg, vocab)),  # last: its presence makes the folder complete
    }
    try:
        with tempfile.TemporaryDirectory(prefix="export-") as tmp:
            wpath = Path(tmp) / WEIGHTS
            weights = {k: v.detach().float() for k, v in tensors.items()}
            save_file(weights, str(wpath), metadata={"format": "pt"})
            out.upload(WEIGHTS, wpath, create_only=True)
            for name, data in documents.items():
                out.write(name, data, create_only=True)
    except BlobExists:
        raise BadInput(f"--output={output_uri} was written to concurrently; export again") from None
    return {
        "exported": out.uri,
        "checkpoint": ck.uri,
        "step": ck.step,
        "run_id": ck.run_id,
        "files": sorted([WEIGHTS, *documents]),
    }


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(
        prog="trainer.export.hf", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkpoint", required=True, metavar="URI", help="checkpoint root (checkpoint.uri)")
    ap.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest committed)")
    ap.add_argument("--output", required=True, metavar="URI", help="the folder to write (empty)")
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    args = ap.parse_args(argv)
    try:
        result = export(args.checkpoint, args.step, args.output)
    except (TrainerError, OSError) as exc:
        if args.debug:
            raise
        print(f"error: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
