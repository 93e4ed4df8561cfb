"""Turn a text file into token shards for the trainer.

Usage::

    python -m trainer.tools.make_shards INPUT.txt OUT_DIR [--shard-tokens N] [--upload s3://bucket/prefix]

The tokenizer is byte-level (token = byte value, 256 = end of text), so no vocabulary download is needed;
documents are separated by blank lines and each ends with the end-of-text token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import numpy as np

from trainer.storage.blobstore import split_s3_uri
from trainer.storage.hashing import sha256_file
from trainer.training.data import INDEX_FILE, SHARD_FORMAT

EOT = 256
VOCAB_SIZE = 257


def encode(text: str) -> np.ndarray:
    """Byte-level tokens of ``text`` with EOT after every blank-line separated document."""
    docs = [d for d in text.split("\n\n") if d.strip()]
    parts = []
    for doc in docs:
        parts.append(np.frombuffer(doc.encode("utf-8"), dtype=np.uint8).astype(np.uint16))
        parts.append(np.array([EOT], dtype=np.uint16))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint16)


def decode(tokens: np.ndarray) -> str:
    """Inverse of :func:`encode` (EOT becomes a blank line)."""
    out = bytearray()
    for t in tokens.tolist():
        out += b"\n\n" if t == EOT else bytes([t])
    return out.decode("utf-8", errors="replace")


def write_shards(tokens: np.ndarray, out_dir: str | os.PathLike[str], shard_tokens: int) -> dict:
    """Split ``tokens`` into ``shard_XXXXX.bin`` files plus ``index.json`` (written last)."""
    if shard_tokens < 2:
        raise ValueError("shard_tokens must be >= 2")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    shards = []
    for n, start in enumerate(range(0, len(tokens), shard_tokens)):
        name = f"shard_{n:05d}.bin"
        chunk = np.ascontiguousarray(tokens[start : start + shard_tokens], dtype="<u2")
        chunk.tofile(out / name)
        shards.append({"file": name, "tokens": int(chunk.shape[0]), "sha256": sha256_file(out / name)})
    index = {
        "format": SHARD_FORMAT,
        "dtype": "uint16",
        "tokenizer": "bytes",
        "vocab_size": VOCAB_SIZE,
        "eot_token": EOT,
        "total_tokens": int(len(tokens)),
        "shards": shards,
    }
    (out / INDEX_FILE).write_text(json.dumps(index, indent=1))
    return index


def upload(out_dir: str | os.PathLike[str], uri: str) -> None:
    """Copy a shard directory to ``s3://bucket/prefix`` (index last, so readers never see a partial set)."""
    import boto3

    bucket, prefix = split_s3_uri(uri)
    s3 = boto3.client("s3")
    files = sorted(p for p in Path(out_dir).iterdir() if p.name != INDEX_FILE)
    for p in [*files, Path(out_dir) / INDEX_FILE]:
        s3.upload_file(str(p), bucket, f"{prefix}/{p.name}" if prefix else p.name)


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("input", help="UTF-8 text file")
    ap.add_argument("out_dir", help="directory for index.json and shard_*.bin")
    ap.add_argument("--shard-tokens", type=int, default=1 << 20, help="tokens per shard (default 1Mi)")
    ap.add_argument("--upload", metavar="S3_URI", help="also upload to s3://bucket/prefix")
    args = ap.parse_args(argv)
    try:
        text = Path(args.input).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        print(f"error: cannot read {args.input}: {exc}", file=sys.stderr)
        return 2
    tokens = encode(text)
    if len(tokens) == 0:
        print(f"error: {args.input} holds no text", file=sys.stderr)
        return 2
    try:
        index = write_shards(tokens, args.out_dir, args.shard_tokens)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.upload:
        upload(args.out_dir, args.upload)
    print(
        json.dumps({"shards": len(index["shards"]), "tokens": index["total_tokens"], "out_dir": args.out_dir})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
