"""Fetch one model release, verified, into a local folder: the init container of the inference pods.

    python -m inference.fetch --root s3://<bucket>[/<prefix>] --model <model_name> \\
        --version <version|latest> --dest <dir> [--base-dir <the base's fetched dir>]

Reads ``<root>/release/<model>/<version>/`` (trainer/release/manifest.py: a Hugging Face causal-LM folder plus
``manifest.json`` and its signature ``manifest.json.sig``), accepts the manifest only when its signature
verifies with the release signing key's public half (the PEM file ``AIPLAT_RELEASE_PUBLIC_KEY`` names, mounted
from the stack's ConfigMap: no KMS call, no network besides S3) and before it downloads any other file,
checks every file's size and sha256 while downloading it into a temporary folder beside ``<dir>`` (same
parent, so the last step is a rename), checks the folder again as the publisher did
(trainer/release/hf_folder.py:
an architecture the pinned vLLM serves, no remote code, config.json and the safetensors headers agreeing,
the serving facts the manifest signed) and only then renames the folder to ``<dir>``: vLLM then loads
``<dir>`` (``--model <dir>``) with no hub access. Releases of the older format ``aiplat-release-v2`` (GPT-2
only) are verified the same way.
``latest`` is the newest version that verifies. A LoRA adapter release (trainer/release/adapter.py) is
verified the same way (signature, every file, the adapter's own check); with ``--base-dir`` (the folder this
tool fetched its base into) the base there must be the one the adapter's manifest names, by the sha256 of
its signed manifest.

Exit codes (the pod's init container status shows them; the one stderr line is its termination message):

- 0: ``<dir>`` holds the verified release; the last stdout line is the version (``latest`` resolved).
- 3: the release is missing, partial, corrupt, unsigned, not signed by the release key, or otherwise not
  servable.
- 4: the store did not answer, or refused us (no bucket, access denied, no credentials).
- 2: bad arguments or a local problem (``<dir>``'s parent missing or not writable, disk full, no readable
  release public key).
- 1: a bug (an unexpected exception).

On any failure exactly one line ``release <model>/<version>: <reason>`` goes to stderr, and neither ``<dir>``
nor a temporary folder is left behind. It writes only under ``<dir>``'s parent (an emptyDir or the node's
NVMe) and ``/tmp``, so it runs on a read-only root filesystem as any user. AWS credentials come from the
default chain (EKS Pod Identity / IRSA); ``AWS_REGION`` and ``AWS_ENDPOINT_URL`` are honoured
(trainer/storage/blobstore.py). Progress goes to stdout.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import Any

from trainer.errors import BadInput, StoreUnavailable
from trainer.release.manifest import (
    MODEL_NAME_RE,
    VERSION_RE,
    Release,
    ReleaseError,
    check_base_folder,
    download,
    list_versions,
)
from trainer.release.signing import PUBLIC_KEY_ENV, trusted_key

LATEST = "latest"
OK, BUG, LOCAL, RELEASE, STORE = 0, 1, 2, 3, 4
FETCHING = ".fetch-"  # temp folder: .<dest name>.fetch-XXXX in dest's parent
REPLACED = ".replaced-"  # the previous <dir> while the new one is renamed in


class Failure(Exception):
    """Ends the tool with ``code`` and one stderr line ``release <model>/<version>: <reason>``."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = " ".join(reason.split())  # one line, whatever the cause's text held


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    # The kubelet stops an init container with SIGTERM (pod deleted mid-download): unwind through the
    # `finally` blocks so the temporary folder goes too.
    raise Failure(LOCAL, "stopped by SIGTERM before the release was in place")


def _leftovers(dest: Path) -> list[Path]:
    """Temporary folders a killed earlier run left beside ``dest`` (SIGKILL, OOM, node reboot)."""
    prefixes = (f".{dest.name}{FETCHING}", f".{dest.name}{REPLACED}")
    return [p for p in dest.parent.iterdir() if p.name.startswith(prefixes)]


def fetch_into(
    root: str, model: str, version: str, dest: Path, public_key: Any, base_dir: Path | None = None
) -> Release:
    """Download ``version`` (a version folder name), signed with ``public_key``'s private half, to ``dest``
    through a temporary sibling folder; raises :class:`~trainer.release.manifest.ReleaseError` / store errors
    with
    nothing left behind."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}{FETCHING}", dir=dest.parent))
    try:
        # mkdtemp makes it 0700; the serving container may run as another user and only reads it.
        tmp.chmod(0o755)
        release = download(root, model, version, tmp, public_key)
        if base_dir is not None:
            if release.adapter is None:
                raise ReleaseError("--base-dir is for an adapter release; this one is a model")
            check_base_folder(release, base_dir, public_key)
        if dest.exists() or dest.is_symlink():  # a restarted init container finds its earlier result
            old = Path(tempfile.mkdtemp(prefix=f".{dest.name}{REPLACED}", dir=dest.parent))
            dest.rename(old / "old")
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(dest)
        return release
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fetch(
    root: str, model: str, version: str, dest: Path, public_key: Any, base_dir: Path | None = None
) -> Release:
    """:func:`fetch_into` for a version or ``latest`` (the newest version that verifies); raises
    :class:`Failure`."""
    try:
        if version != LATEST:
            return fetch_into(root, model, version, dest, public_key, base_dir)
        versions = list_versions(root, model)
        if not versions:
            raise Failure(RELEASE, f"no version under {root.rstrip('/')}/release/{model}/")
        skipped: list[str] = []
        for v in reversed(versions):
            try:
                return fetch_into(root, model, v, dest, public_key, base_dir)
            except ReleaseError as exc:
                print(f"skipped {model}/{v}: {exc.reason}", flush=True)
                skipped.append(f"{v}: {exc.reason}")
        raise Failure(RELEASE, f"none of the {len(versions)} versions verifies (newest {skipped[0]})")
    except ReleaseError as exc:
        raise Failure(RELEASE, exc.reason) from None
    except StoreUnavailable as exc:
        raise Failure(STORE, f"release store unavailable: {exc}") from None
    except BadInput as exc:  # no bucket, access denied, no credentials: the store refused us
        raise Failure(STORE, f"release store refused the request: {exc}") from None
    except OSError as exc:
        raise Failure(LOCAL, f"cannot write beside {dest}: {exc}") from None


def _public_key() -> Any:
    try:
        return trusted_key()
    except BadInput as exc:
        raise Failure(LOCAL, f"{exc} ({PUBLIC_KEY_ENV})") from None


def _check_args(args: argparse.Namespace) -> Path:
    if not MODEL_NAME_RE.match(args.model):
        raise Failure(
            RELEASE, "--model must be 1-63 of a-z 0-9 . _ - (the name given to trainer.release.publish)"
        )
    if args.version != LATEST and not VERSION_RE.match(args.version):
        example = "20261130T100100Z-step4"
        raise Failure(RELEASE, f"--version must be {LATEST} or a version folder such as {example}")
    root = args.root
    if "://" in root and not (root.startswith("s3://") and len(root) > 5 and root[5] != "/"):
        raise Failure(LOCAL, f"--root={root!r}: use s3://bucket[/prefix] (or a local directory)")
    dest = Path(args.dest).absolute()
    if not dest.parent.is_dir():
        raise Failure(LOCAL, f"--dest={args.dest}: its parent {dest.parent} is not a directory (mount one)")
    return dest


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; returns the exit code."""
    ap = argparse.ArgumentParser(
        prog="inference.fetch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--root", required=True, help="s3://bucket[/prefix] (or a local directory) with release/")
    ap.add_argument("--model", required=True, help="release/<model>/ (trainer.release.publish --model-name)")
    ap.add_argument("--version", required=True, help=f"a version folder name, or {LATEST}")
    ap.add_argument("--dest", required=True, help="the folder to create (its parent must exist)")
    ap.add_argument(
        "--base-dir",
        default=None,
        help="for an adapter release: the folder its base was fetched into, which must be the base it names",
    )
    args = ap.parse_args(argv)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    dest = Path(args.dest)
    try:
        dest = _check_args(args)
        public_key = _public_key()
        for stale in _leftovers(dest):
            shutil.rmtree(stale, ignore_errors=True)
        print(f"fetching {args.model}/{args.version} from {args.root} into {dest}", flush=True)
        base_dir = Path(args.base_dir) if args.base_dir else None
        rel = fetch(args.root, args.model, args.version, dest, public_key, base_dir)
    except Failure as exc:
        print(f"release {args.model}/{args.version}: {exc.reason}", file=sys.stderr, flush=True)
        return exc.code
    except Exception as exc:  # a bug: still one line, and still no folder left (fetch_into's finally)
        reason = " ".join(f"internal error: {type(exc).__name__}: {exc}".split())
        print(f"release {args.model}/{args.version}: {reason}",
              file=sys.stderr, flush=True)  # fmt: skip
        return BUG
    finally:
        signal.signal(signal.SIGTERM, previous)
    total = sum(f.size for f in rel.files.values())
    if rel.adapter is not None and rel.adapter.base is not None:
        a, b = rel.adapter, rel.adapter.base
        what = f"LoRA adapter rank {a.rank} on {b.model_name}/{b.version}, {a.dtype}, {a.parameters}"
    else:
        assert rel.serving is not None  # a verified model release has its serving facts
        s = rel.serving
        what = f"{s.architecture}, {s.dtype}, {s.parameters}"
    print(
        f"verified {len(rel.files)} files, {total} bytes: {what} parameters, step {rel.step} from "
        f"{rel.source.describe()}"
    )
    print(rel.version, flush=True)
    return OK


if __name__ == "__main__":
    raise SystemExit(main())
