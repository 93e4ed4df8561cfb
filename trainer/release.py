"""Model releases: the weights of one committed checkpoint, published for inference under ``release/``.

Layout, in a bucket (``s3://bucket[/prefix]``, boto3, ``AWS_ENDPOINT_URL`` honoured) or a local directory::

    <root>/release/<model_name>/<version>/
        config.json             a Hugging Face GPT-2 folder that transformers and vLLM load as it is
        generation_config.json  (``--model <dir>``): names, shapes and files are trainer/hf_gpt2.py's;
        model.safetensors       weights only (no pickle: a pod must never unpickle a model), float32,
        tokenizer.json          GPT-2 tensor names and Conv1D layouts, lm_head tied to wte, the embedding
        tokenizer_config.json   rows beyond the tokenizer's vocabulary left out
        manifest.json.sig       the publisher's signature of manifest.json (trainer/signing.py: ECDSA
                                P-256 with the stack's release signing key in KMS), written before it
        manifest.json           written LAST: format, model name, version, size and sha256 of every file,
                                source (run id, checkpoint URI, step), the trainer's metrics at that step,
                                tokenizer, creation time (UTC)

``version`` is ``<YYYYmmddTHHMMSSZ>-step<N>`` (UTC), so lexicographic order is publication order.
Publishing is an explicit step (``python -m trainer.publish``); the trainer itself never writes here. Every
object is written create-only (``If-None-Match: *``, which the artifacts bucket policy requires under
``release/``), so a published version is never overwritten. A reader accepts a manifest only when its
signature verifies with the trusted public key (:func:`accept_manifest`), before it reads any other file:
the sha256 sums catch corruption, the signature catches tampering.

Replication to other regions copies objects one by one in no particular order, so a reader can see a
manifest before the files it names: :func:`verify` reports such a release as incomplete
(:class:`ReleaseError`) rather than failing in some other way, and :func:`newest_valid` falls back to the
newest version that verifies. Store outages are not release defects: they raise
:class:`~trainer.errors.StoreUnavailable`, never :class:`ReleaseError`.

This module needs no torch (the fetch tool's image, inference/fetch.py, has none); publishing, which
does, is trainer/publish.py.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer.blobstore import Blobs, open_blobs
from trainer.errors import BadInput, BlobNotFound
from trainer.hashing import MANIFEST, is_sha256_hex, sha256_stream
from trainer.hf_gpt2 import ReleaseFormatError, check_config, hf_shapes
from trainer.signing import SIGNATURE_SUFFIX, BadSignature, trusted_key, verify_signature

FORMAT = "aiplat-release-v2"
RELEASE_PREFIX = "release"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
FILES = (CONFIG, GENERATION_CONFIG, WEIGHTS, TOKENIZER, TOKENIZER_CONFIG)
SIGNATURE = MANIFEST + SIGNATURE_SUFFIX  # manifest.json.sig
VERSION_RE = re.compile(r"^(\d{8}T\d{6}Z)-step(\d+)$")
MODEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_ST_DTYPES = {"F32", "BF16", "F16"}
HEADER_MAX = 100 << 20  # safetensors caps its JSON header at 100 MB (safetensors/src/tensor.rs)


class ReleaseError(BadInput):
    """A release that cannot be served; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class FileEntry:
    """One file of a release as the manifest records it."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Source:
    """Where the weights came from."""

    run_id: str
    checkpoint_uri: str
    step: int


@dataclass(frozen=True)
class Release:
    """A verified release (or, from :func:`trainer.publish.publish`, one just written)."""

    root: str
    model_name: str
    version: str
    uri: str
    config: dict[str, Any]  # config.json: the GPT-2 config (trainer/hf_gpt2.py)
    files: dict[str, FileEntry]
    source: Source
    metrics: dict[str, Any] | None
    tokenizer: dict[str, Any] | None
    created_utc: str

    @property
    def step(self) -> int:
        """Training step of the weights."""
        return self.source.step


def make_version(step: int, now: datetime | None = None) -> str:
    """``<YYYYmmddTHHMMSSZ>-step<N>`` for a release of ``step`` published at ``now`` (UTC)."""
    now = (now or datetime.now(UTC)).astimezone(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-step{step}"


def check_model_name(model_name: str) -> None:
    """Raise :class:`BadInput` unless ``model_name`` is a safe folder name."""
    if not MODEL_NAME_RE.match(model_name or ""):
        raise BadInput(
            f"--model-name={model_name!r}: use 1-63 lowercase letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )


def versions_store(root: str, model_name: str) -> Blobs:
    """The store under ``<root>/release/<model_name>/`` (one folder per version)."""
    check_model_name(model_name)
    return open_blobs(root).child(f"{RELEASE_PREFIX}/{model_name}")


def list_versions(root: str, model_name: str) -> list[str]:
    """Well-formed version folders of ``model_name`` (verified or not), oldest first."""
    return sorted(v for v in versions_store(root, model_name).list_dirs() if VERSION_RE.match(v))


# ------------------------------------------------------------------------------------------ manifest
def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ReleaseError(f"{MANIFEST}: {what}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def accept_manifest(
    raw: bytes, signature: bytes, public_key: Any, root: str, model_name: str, version: str, uri: str
) -> Release:
    """The one place a release's manifest is accepted, before any file of the release is read: its
    ``signature`` must verify with ``public_key`` (the release signing key's public half), then every field
    is type-checked against the folder it came from (:func:`parse_manifest`). Returns the release with an
    empty ``config`` (filled in from config.json once its sha256 matched)."""
    try:
        verify_signature(raw, signature, public_key)
    except BadSignature as exc:
        raise ReleaseError(f"{MANIFEST}: {exc.reason}") from None
    return parse_manifest(raw, root, model_name, version, uri)


def parse_manifest(raw: bytes, root: str, model_name: str, version: str, uri: str) -> Release:
    """The fields of a manifest, type-checked, without the signature check: for the publisher's own
    manifest, just written; readers go through :func:`accept_manifest`."""
    try:
        m = json.loads(raw)
    except ValueError as exc:
        raise ReleaseError(f"{MANIFEST} is not valid JSON ({exc})") from None
    _need(isinstance(m, dict), "must be a JSON object")
    _need(m.get("format") == FORMAT, f"format {m.get('format')!r} is not {FORMAT!r}")
    _need(m.get("model_name") == model_name, f"model_name {m.get('model_name')!r} is not {model_name!r}")
    _need(m.get("version") == version, f"version {m.get('version')!r} is not the folder's {version!r}")
    files = m.get("files")
    _need(isinstance(files, dict), "files must be an object {name: {size, sha256}}")
    _need(set(files) == set(FILES), f"files must be exactly {', '.join(FILES)}, not {sorted(files)}")
    entries = {}
    for name in FILES:
        e = files[name]
        _need(isinstance(e, dict), f"files.{name} must be an object {{size, sha256}}")
        _need(_is_int(e.get("size")) and e["size"] >= 0, f"files.{name}.size must be a byte count")
        _need(is_sha256_hex(e.get("sha256")), f"files.{name}.sha256 must be 64 hex digits")
        entries[name] = FileEntry(e["size"], e["sha256"])
    src = m.get("source")
    _need(isinstance(src, dict), "source must be an object {run_id, checkpoint_uri, step}")
    _need(isinstance(src.get("run_id"), str), "source.run_id must be a string")
    _need(isinstance(src.get("checkpoint_uri"), str), "source.checkpoint_uri must be a string")
    _need(_is_int(src.get("step")) and src["step"] >= 0, "source.step must be a step number")
    vm = VERSION_RE.match(version)
    _need(
        vm is not None and int(vm.group(2)) == src["step"],
        f"source.step {src['step']} is not the version's step",
    )
    metrics = m.get("metrics")
    _need(metrics is None or isinstance(metrics, dict), "metrics must be an object or null")
    tok = m.get("tokenizer")
    _need(tok is None or isinstance(tok, dict), "tokenizer must be an object or null")
    _need(isinstance(m.get("created_utc"), str), "created_utc must be a string")
    return Release(
        root=root,
        model_name=model_name,
        version=version,
        uri=uri,
        config={},
        files=entries,
        source=Source(src["run_id"], src["checkpoint_uri"], src["step"]),
        metrics=metrics,
        tokenizer=tok,
        created_utc=m["created_utc"],
    )


def _json_object(name: str, raw: bytes) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ReleaseError(f"{name} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReleaseError(f"{name} must be a JSON object")
    return data


def parse_config(raw: bytes) -> dict[str, Any]:
    """``config.json`` -> the GPT-2 config as a dict, checked by :func:`trainer.hf_gpt2.check_config`."""
    try:
        return check_config(_json_object(CONFIG, raw))
    except ReleaseFormatError as exc:
        raise ReleaseError(f"{CONFIG}: {exc}") from None


def _check_header(head: bytes, config: dict[str, Any]) -> None:
    """The safetensors header (8-byte length + JSON table) names exactly the tensors ``config`` needs."""
    if len(head) < 8:
        raise ReleaseError(f"{WEIGHTS}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", head[:8])
    if n > len(head) - 8:
        raise ReleaseError(f"{WEIGHTS}: header of {n} bytes runs past the file")
    try:
        table = json.loads(head[8 : 8 + n])
    except ValueError:
        raise ReleaseError(f"{WEIGHTS}: header is not valid JSON") from None
    if not isinstance(table, dict):
        raise ReleaseError(f"{WEIGHTS}: header is not a JSON object")
    table.pop("__metadata__", None)
    want = hf_shapes(config)
    got = {k: v.get("shape") for k, v in table.items() if isinstance(v, dict)}
    if got != want:
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        shapes = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        raise ReleaseError(
            f"{WEIGHTS} does not match {CONFIG}: missing {missing[:3]}, unexpected {extra[:3]}, "
            f"other shapes {shapes[:3]}"
        )
    if bad := sorted(k for k, v in table.items() if v.get("dtype") not in _ST_DTYPES):
        raise ReleaseError(f"{WEIGHTS}: unsupported dtype for {bad[:3]}")


class _Head:
    """Keeps the safetensors header of a stream of blocks (its length is in the first 8 bytes)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def __call__(self, block: bytes) -> None:
        want = HEADER_MAX + 8
        if len(self.data) >= 8:
            want = min(want, 8 + struct.unpack("<Q", self.data[:8])[0])
        if len(self.data) < want:
            self.data.extend(block[: want - len(self.data)])


# ----------------------------------------------------------------------------------------- reading
def _read_release(
    root: str, model_name: str, version: str, public_key: Any, download_to: Path | None = None
) -> Release:
    if not VERSION_RE.match(version or ""):
        raise ReleaseError(f"{version!r} is not a release version (<YYYYmmddTHHMMSSZ>-step<N>)")
    public_key = public_key if public_key is not None else trusted_key()
    store = versions_store(root, model_name).child(version)
    try:
        raw = store.read(MANIFEST)
    except BlobNotFound:
        raise ReleaseError(
            f"no {MANIFEST} (publishing did not finish, or replication has not copied it yet)"
        ) from None
    try:
        signature = store.read(SIGNATURE)
    except BlobNotFound:
        raise ReleaseError(
            f"no {SIGNATURE}: unsigned release (or replication has not copied it yet)"
        ) from None
    # Nothing else of the release is read before the signed manifest is accepted.
    rel = accept_manifest(raw, signature, public_key, root, model_name, version, store.uri)
    present = store.list()
    for name, entry in rel.files.items():
        if name not in present:
            raise ReleaseError(f"incomplete: {name} missing (replication not finished, or deleted)")
        if present[name] != entry.size:
            raise ReleaseError(
                f"incomplete: {name} has {present[name]} bytes, {MANIFEST} says {entry.size} "
                "(replication not finished, or truncated)"
            )
    small: dict[str, bytes] = {}  # every file but the weights, kept to be parsed once its sha256 matched
    head = _Head()
    if download_to is not None:
        download_to.mkdir(parents=True, exist_ok=True)
    for name, entry in rel.files.items():
        buf = bytearray()
        keep = head if name == WEIGHTS else buf.extend
        if download_to is not None:
            part = download_to / f".{name}.part"
            with store.open(name) as src, open(part, "wb") as out:
                sha, _ = sha256_stream(src, lambda b, keep=keep, out=out: (keep(b), out.write(b)))
        else:
            with store.open(name) as f:
                sha, _ = sha256_stream(f, keep)
        if sha != entry.sha256:
            raise ReleaseError(f"{name}: sha256 does not match {MANIFEST} (corrupt or replaced)")
        if download_to is not None:
            part.replace(download_to / name)
        if name != WEIGHTS:
            small[name] = bytes(buf)
    config = parse_config(small[CONFIG])
    for name in (GENERATION_CONFIG, TOKENIZER, TOKENIZER_CONFIG):
        _json_object(name, small[name])
    _check_header(bytes(head.data), config)
    if download_to is not None:
        (download_to / SIGNATURE).write_bytes(signature)
        (download_to / MANIFEST).write_bytes(raw)
    return dataclasses.replace(rel, config=config)


def verify(root: str, model_name: str, version: str, public_key: Any = None) -> Release:
    """The release at ``<root>/release/<model_name>/<version>`` if it is signed, complete and intact
    (manifest signature verified with ``public_key``, default :func:`trainer.signing.trusted_key`; manifest
    accepted, every file present with its size and sha256, config.json the GPT-2 config whose tensors the
    weights file holds, the other files JSON objects); else :class:`ReleaseError` with the reason."""
    return _read_release(root, model_name, version, public_key)


def download(root: str, model_name: str, version: str, dest: str | Path, public_key: Any = None) -> Release:
    """Copy a release into the local directory ``dest``, verifying every byte on the way (the same checks
    as :func:`verify`); files appear under their names only once they matched the manifest, and
    ``manifest.json`` only once all did. On :class:`ReleaseError` ``dest`` may hold a part: the caller
    downloads into a folder of its own (inference/fetch.py) and removes it."""
    return _read_release(root, model_name, version, public_key, download_to=Path(dest))


def newest_valid(
    root: str, model_name: str, public_key: Any = None
) -> tuple[Release | None, list[tuple[str, str]]]:
    """The newest version that verifies, and ``(version, reason)`` for each newer one that did not."""
    public_key = public_key if public_key is not None else trusted_key()
    skipped: list[tuple[str, str]] = []
    for version in reversed(list_versions(root, model_name)):
        try:
            return verify(root, model_name, version, public_key), skipped
        except ReleaseError as exc:
            skipped.append((version, exc.reason))
    return None, skipped
