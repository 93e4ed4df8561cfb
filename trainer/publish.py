"""Publish a model release from a committed checkpoint as a Hugging Face GPT-2 folder (the layout:
``trainer/release.py``; the tensor and file mapping: ``trainer/hf_gpt2.py``).

    python -m trainer.publish --checkpoint URI [--step N] --release-root URI --model-name NAME \\
        [--signing-key KMS_KEY_ARN]

``--checkpoint`` is the training run's ``checkpoint.uri`` (or one ``step_XXXXXXXXX`` folder in it);
without ``--step`` the newest committed checkpoint whose files match its manifest is used.
``--release-root`` is the bucket or directory whose ``release/`` prefix the inference regions read.
``--signing-key`` (default: ``AIPLAT_RELEASE_SIGNING_KEY``) is the stack's release signing key in KMS
(output ``releaseSigningKeyArn``), or ``file:<pem>`` for a local key (tests); trainer/signing.py.
Prints one JSON line describing the release. Exit codes: 0 published; 2 anything refused or failed
(one line on stderr naming the cause; ``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from trainer.config import ConfigError, ModelConfig
from trainer.errors import BadInput, BlobExists, TrainerError
from trainer.hashing import MANIFEST, sha256_bytes, sha256_file
from trainer.hf_gpt2 import (
    ByteVocab,
    ReleaseFormatError,
    generation_config,
    hf_config,
    to_hf_tensors,
    tokenizer_config,
    tokenizer_json,
)
from trainer.release import (
    CONFIG,
    FORMAT,
    GENERATION_CONFIG,
    RELEASE_PREFIX,
    SIGNATURE,
    TOKENIZER,
    TOKENIZER_CONFIG,
    WEIGHTS,
    Release,
    check_model_name,
    make_version,
    parse_manifest,
    versions_store,
)
from trainer.signing import Signer, signer_for


def _json_bytes(data: dict) -> bytes:
    return (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode()


def publish(
    checkpoint_uri: str,
    step: int | None,
    release_root: str,
    model_name: str,
    *,
    signer: Signer | None = None,
    now: datetime | None = None,
) -> Release:
    """Publish the model weights of a committed, verified checkpoint (the newest when ``step`` is None)
    from ``checkpoint_uri`` (a checkpoint root, as in ``checkpoint.uri``) as a new version of
    ``model_name`` under ``<release_root>/release/``; returns the release written. ``signer`` signs the
    manifest (default: :func:`trainer.signing.signer_for` the ``AIPLAT_RELEASE_SIGNING_KEY``). Every object
    is created, never replaced (``If-None-Match``: the bucket policy refuses anything else under
    ``release/``); the files go up first, then ``manifest.json.sig``, ``manifest.json`` last, so a reader
    never accepts a release still being written."""
    from safetensors.torch import save_file

    from trainer.checkpoint import open_committed
    from trainer.model import GPT

    check_model_name(model_name)
    signer = signer if signer is not None else signer_for(None)
    if f"/{RELEASE_PREFIX}/" in f"/{checkpoint_uri.rstrip('/')}/":
        raise BadInput(f"--checkpoint={checkpoint_uri}: a checkpoint cannot live under {RELEASE_PREFIX}/")
    ck = open_committed(checkpoint_uri, step)
    try:
        cfg = ModelConfig(**ck.manifest.config["model"])
    except (KeyError, TypeError, ConfigError) as exc:
        raise BadInput(f"{ck.uri}: {MANIFEST} holds no usable model config ({exc})") from None
    tokenizer = (ck.manifest.data or {}).get("tokenizer")
    try:
        vocab = ByteVocab.from_index(tokenizer, cfg.vocab_size)
        tensors = to_hf_tensors(ck.load_model_weights(GPT(cfg)), cfg, vocab)
    except ReleaseFormatError as exc:
        raise BadInput(f"{ck.uri}: cannot publish as GPT-2: {exc}") from None
    version = make_version(ck.step, now)
    store = versions_store(release_root, model_name).child(version)
    if store.list():
        raise BadInput(f"{store.uri} already exists; publish again a second later")
    documents = {
        CONFIG: _json_bytes(hf_config(cfg, vocab)),
        GENERATION_CONFIG: _json_bytes(generation_config(vocab)),
        TOKENIZER: _json_bytes(tokenizer_json(vocab)),
        TOKENIZER_CONFIG: _json_bytes(tokenizer_config(vocab, cfg.seq_len)),
    }
    try:
        with tempfile.TemporaryDirectory(prefix="release-") as tmp:
            wpath = Path(tmp) / WEIGHTS
            tensors = {k: v.detach().float() for k, v in tensors.items()}
            save_file(tensors, str(wpath), metadata={"format": "pt"})
            files = {WEIGHTS: {"size": wpath.stat().st_size, "sha256": sha256_file(wpath)}}
            for name, data in documents.items():
                files[name] = {"size": len(data), "sha256": sha256_bytes(data)}
                store.write(name, data, create_only=True)
            store.upload(WEIGHTS, wpath, create_only=True)
    except BlobExists:
        raise BadInput(f"{store.uri} was published concurrently; publish again") from None
    manifest = {
        "format": FORMAT,
        "model_name": model_name,
        "version": version,
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": dict(sorted(files.items())),
        "source": {"run_id": ck.run_id, "checkpoint_uri": ck.uri, "step": ck.step},
        "metrics": ck.manifest.metrics,
        "tokenizer": {"tokenizer": "bytes", "vocab_size": vocab.size, "eot_token": vocab.eot},
    }
    raw = json.dumps(manifest, indent=1).encode()
    signature = signer.sign(raw)
    try:
        store.write(SIGNATURE, signature, create_only=True)
        store.write(MANIFEST, raw, create_only=True)
    except BlobExists:
        raise BadInput(f"{store.uri} was published concurrently; publish again") from None
    rel = parse_manifest(raw, release_root, model_name, version, store.uri)
    return dataclasses.replace(rel, config=json.loads(documents[CONFIG]))


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(
        prog="trainer.publish", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--checkpoint", required=True, metavar="URI", help="checkpoint root (checkpoint.uri)")
    ap.add_argument("--step", type=int, default=None, help="checkpoint step (default: newest committed)")
    ap.add_argument("--release-root", required=True, metavar="URI", help="s3://bucket[/prefix] or a dir")
    ap.add_argument("--model-name", required=True, help="release/<model-name>/<version>/")
    ap.add_argument(
        "--signing-key",
        default=None,
        help="KMS key ARN/alias that signs the manifest, or file:<pem> (default: "
        "$AIPLAT_RELEASE_SIGNING_KEY)",
    )
    ap.add_argument("--debug", action="store_true", help="show tracebacks")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:
        rel = publish(
            args.checkpoint,
            args.step,
            args.release_root,
            args.model_name,
            signer=signer_for(args.signing_key),
        )
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
