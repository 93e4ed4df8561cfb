"""Model releases: the weights of one committed checkpoint, published for inference under ``release/``.

Layout, in a bucket (``s3://bucket[/prefix]``, boto3, ``AWS_ENDPOINT_URL`` honoured) or a local directory::

    <root>/release/<model_name>/<version>/
        model.safetensors   weights only (no pickle: a pod must never unpickle a model); tensors of
                            ``GPT(config).state_dict()`` in float32, tied duplicates stored once (see
                            ``tied_weights`` in the manifest; :func:`load_model` restores them)
        config.json         the ``ModelConfig`` as a JSON object
        manifest.json       written LAST: format, model name, version, size and sha256 of every file,
                            source (run id, checkpoint URI, step), the trainer's metrics at that step,
                            tokenizer, creation time (UTC)

``version`` is ``<YYYYmmddTHHMMSSZ>-step<N>`` (UTC), so lexicographic order is publication order.
Publishing is an explicit step (``python -m trainer.publish``); the trainer itself never writes here.

Replication to other regions copies objects one by one in no particular order, so a reader can see a
manifest before the files it names: :func:`verify` reports such a release as incomplete
(:class:`ReleaseError`) rather than failing in some other way, and :func:`newest_valid` falls back to the
newest version that verifies. Store outages are not release defects: they raise
:class:`~trainer.errors.StoreUnavailable`, never :class:`ReleaseError`.
"""

from __future__ import annotations

import dataclasses
import json
import re
import struct
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from trainer.blobstore import Blobs, open_blobs
from trainer.config import ConfigError, ModelConfig
from trainer.errors import BadInput, BlobExists, BlobNotFound
from trainer.hashing import MANIFEST, is_sha256_hex, sha256_bytes, sha256_file, sha256_stream

FORMAT = "aiplat-release-v1"
RELEASE_PREFIX = "release"
WEIGHTS = "model.safetensors"
CONFIG = "config.json"
FILES = (WEIGHTS, CONFIG)
VERSION_RE = re.compile(r"^(\d{8}T\d{6}Z)-step(\d+)$")
MODEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_ST_DTYPES = {"F32", "BF16", "F16"}


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
    """A verified release (or, from :func:`publish`, one just written)."""

    root: str
    model_name: str
    version: str
    uri: str
    config: ModelConfig
    files: dict[str, FileEntry]
    source: Source
    metrics: dict[str, Any] | None
    tokenizer: dict[str, Any] | None
    tied_weights: dict[str, str]
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


def _versions_store(root: str, model_name: str) -> Blobs:
    check_model_name(model_name)
    return open_blobs(root).child(f"{RELEASE_PREFIX}/{model_name}")


def list_versions(root: str, model_name: str) -> list[str]:
    """Well-formed version folders of ``model_name`` (verified or not), oldest first."""
    return sorted(v for v in _versions_store(root, model_name).list_dirs() if VERSION_RE.match(v))


# ------------------------------------------------------------------------------------------ manifest
def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ReleaseError(f"{MANIFEST}: {what}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _parse_manifest(raw: bytes, root: str, model_name: str, version: str, uri: str) -> Release:
    """Type-check every field; the release's config is filled in later from config.json."""
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
    for name, e in files.items():
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
    assert vm is not None
    _need(int(vm.group(2)) == src["step"], f"source.step {src['step']} is not the version's step")
    metrics = m.get("metrics")
    _need(metrics is None or isinstance(metrics, dict), "metrics must be an object or null")
    tok = m.get("tokenizer")
    _need(tok is None or isinstance(tok, dict), "tokenizer must be an object or null")
    tied = m.get("tied_weights", {})
    _need(
        isinstance(tied, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in tied.items()),
        "tied_weights must be an object {name: name}",
    )
    _need(isinstance(m.get("created_utc"), str), "created_utc must be a string")
    return Release(
        root=root,
        model_name=model_name,
        version=version,
        uri=uri,
        config=ModelConfig(),
        files=entries,
        source=Source(src["run_id"], src["checkpoint_uri"], src["step"]),
        metrics=metrics,
        tokenizer=tok,
        tied_weights=tied,
        created_utc=m["created_utc"],
    )


def parse_config(raw: bytes) -> ModelConfig:
    """``config.json`` -> :class:`ModelConfig` (unknown keys and bad values are :class:`ReleaseError`)."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ReleaseError(f"{CONFIG} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ReleaseError(f"{CONFIG} must be a JSON object")
    known = {f.name for f in dataclasses.fields(ModelConfig)}
    if unknown := sorted(set(data) - known):
        raise ReleaseError(f"{CONFIG}: unknown keys {unknown}")
    try:
        return ModelConfig(**data)
    except ConfigError as exc:
        raise ReleaseError(f"{CONFIG}: {exc}") from None


def expected_tensors(cfg: ModelConfig) -> dict[str, list[int]]:
    """Names and shapes ``model.safetensors`` must hold for ``cfg`` (tied duplicates left out)."""
    from trainer.model import GPT

    with torch.device("meta"):
        model = GPT(cfg)
    return {k: list(v.shape) for k, v in model.state_dict().items() if k not in GPT.TIED_WEIGHTS}


def _check_header(head: bytes, cfg: ModelConfig) -> None:
    """The safetensors header (8-byte length + JSON table) names exactly the tensors ``cfg`` needs."""
    if len(head) < 8:
        raise ReleaseError(f"{WEIGHTS}: shorter than a safetensors header")
    (n,) = struct.unpack("<Q", head[:8])
    if n > len(head) - 8:
        raise ReleaseError(f"{WEIGHTS}: header of {n} bytes runs past the file")
    try:
        table = json.loads(head[8 : 8 + n])
    except ValueError:
        raise ReleaseError(f"{WEIGHTS}: header is not valid JSON") from None
    table.pop("__metadata__", None)
    want = expected_tensors(cfg)
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


# ----------------------------------------------------------------------------------------- reading
def _read_release(root: str, model_name: str, version: str, download_to: Path | None = None) -> Release:
    if not VERSION_RE.match(version or ""):
        raise ReleaseError(f"{version!r} is not a release version (<YYYYmmddTHHMMSSZ>-step<N>)")
    store = _versions_store(root, model_name).child(version)
    try:
        raw = store.read(MANIFEST)
    except BlobNotFound:
        raise ReleaseError(
            f"no {MANIFEST} (publishing did not finish, or replication has not copied it yet)"
        ) from None
    rel = _parse_manifest(raw, root, model_name, version, store.uri)
    present = store.list()
    for name, entry in rel.files.items():
        if name not in present:
            raise ReleaseError(f"incomplete: {name} missing (replication not finished, or deleted)")
        if present[name] != entry.size:
            raise ReleaseError(
                f"incomplete: {name} has {present[name]} bytes, {MANIFEST} says {entry.size} "
                "(replication not finished, or truncated)"
            )
    cfg_raw = store.read(CONFIG)
    head = bytearray()

    def keep_head(block: bytes) -> None:
        if len(head) < (1 << 20):
            head.extend(block[: (1 << 20) - len(head)])

    for name, entry in rel.files.items():
        if download_to is not None:
            download_to.mkdir(parents=True, exist_ok=True)
            part = download_to / f".{name}.part"
            sha, _ = store.download(name, part)
        else:
            with store.open(name) as f:
                sha, _ = sha256_stream(f, keep_head if name == WEIGHTS else None)
        if sha != entry.sha256:
            raise ReleaseError(f"{name}: sha256 does not match {MANIFEST} (corrupt or replaced)")
        if download_to is not None:
            part.replace(download_to / name)
    if download_to is not None:
        with open(download_to / WEIGHTS, "rb") as f:
            head = bytearray(f.read(1 << 20))
        (download_to / MANIFEST).write_bytes(raw)
    cfg = parse_config(cfg_raw)
    _check_header(bytes(head), cfg)
    return dataclasses.replace(rel, config=cfg)


def verify(root: str, model_name: str, version: str) -> Release:
    """The release at ``<root>/release/<model_name>/<version>`` if it is complete and intact (manifest
    type-checked, every file present with its size and sha256, config.json a valid ModelConfig whose
    tensors the weights file holds); else :class:`ReleaseError` with the reason."""
    return _read_release(root, model_name, version)


def download(root: str, model_name: str, version: str, dest: str | Path) -> Release:
    """Copy a release into the local directory ``dest``, verifying every byte on the way (the same checks
    as :func:`verify`); files appear under their names only once they matched the manifest."""
    return _read_release(root, model_name, version, download_to=Path(dest))


def newest_valid(root: str, model_name: str) -> tuple[Release | None, list[tuple[str, str]]]:
    """The newest version that verifies, and ``(version, reason)`` for each newer one that did not."""
    skipped: list[tuple[str, str]] = []
    for version in reversed(list_versions(root, model_name)):
        try:
            return verify(root, model_name, version), skipped
        except ReleaseError as exc:
            skipped.append((version, exc.reason))
    return None, skipped


def load_model(directory: str | Path, device: str | torch.device = "cpu") -> Any:
    """A ``GPT`` with the weights of a downloaded release directory (safetensors only, no pickle)."""
    from safetensors.torch import load_file

    from trainer.model import GPT

    d = Path(directory)
    cfg = parse_config((d / CONFIG).read_bytes())
    model = GPT(cfg)
    result = model.load_state_dict(load_file(d / WEIGHTS, device="cpu"), strict=False)
    if set(result.missing_keys) - set(GPT.TIED_WEIGHTS) or result.unexpected_keys:
        raise ReleaseError(f"{WEIGHTS}: missing {result.missing_keys}, unexpected {result.unexpected_keys}")
    return model.to(device).eval()


# ---------------------------------------------------------------------------------------- publishing
def publish(
    checkpoint_uri: str,
    step: int | None,
    release_root: str,
    model_name: str,
    *,
    now: datetime | None = None,
) -> Release:
    """Publish the model weights of a committed, verified checkpoint (the newest when ``step`` is None)
    from ``checkpoint_uri`` (a checkpoint root, as in ``checkpoint.uri``) as a new version of
    ``model_name`` under ``<release_root>/release/``; returns the release written."""
    from safetensors.torch import save_file

    from trainer.checkpoint import open_committed
    from trainer.model import GPT

    check_model_name(model_name)
    if f"/{RELEASE_PREFIX}/" in f"/{checkpoint_uri.rstrip('/')}/":
        raise BadInput(f"--checkpoint={checkpoint_uri}: a checkpoint cannot live under {RELEASE_PREFIX}/")
    ck = open_committed(checkpoint_uri, step)
    try:
        cfg = ModelConfig(**ck.manifest.config["model"])
    except (KeyError, TypeError, ConfigError) as exc:
        raise BadInput(f"{ck.uri}: {MANIFEST} holds no usable model config ({exc})") from None
    model = GPT(cfg)
    weights = ck.load_model_weights(model)
    version = make_version(ck.step, now)
    store = _versions_store(release_root, model_name).child(version)
    if store.list():
        raise BadInput(f"{store.uri} already exists; publish again a second later")
    tied = dict(GPT.TIED_WEIGHTS)
    tensors = {k: v.detach().contiguous() for k, v in weights.items() if k not in tied}
    config_bytes = json.dumps(dataclasses.asdict(cfg), indent=1, sort_keys=True).encode()
    with tempfile.TemporaryDirectory(prefix="release-") as tmp:
        wpath = Path(tmp) / WEIGHTS
        save_file(tensors, str(wpath), metadata={"format": "pt"})
        files = {
            WEIGHTS: {"size": wpath.stat().st_size, "sha256": sha256_file(wpath)},
            CONFIG: {"size": len(config_bytes), "sha256": sha256_bytes(config_bytes)},
        }
        store.write(CONFIG, config_bytes)
        store.upload(WEIGHTS, wpath)
    manifest = {
        "format": FORMAT,
        "model_name": model_name,
        "version": version,
        "created_utc": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": files,
        "source": {"run_id": ck.run_id, "checkpoint_uri": ck.uri, "step": ck.step},
        "metrics": ck.manifest.metrics,
        "tokenizer": (ck.manifest.data or {}).get("tokenizer"),
        "tied_weights": tied,
    }
    try:
        store.write(MANIFEST, json.dumps(manifest, indent=1).encode(), create_only=True)
    except BlobExists:
        raise BadInput(f"{store.uri} was published concurrently; publish again") from None
    rel = _parse_manifest(json.dumps(manifest).encode(), release_root, model_name, version, store.uri)
    return dataclasses.replace(rel, config=cfg)
