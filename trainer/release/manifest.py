"""Model releases: a Hugging Face causal-LM folder, checked, hashed and signed, published for inference under
``release/``.

Layout, in a bucket (``s3://bucket[/prefix]``, boto3, ``AWS_ENDPOINT_URL`` honoured) or a local directory::

    <root>/release/<model_name>/<version>/
        config.json, *.safetensors [+ model.safetensors.index.json], tokenizer files, optional
        generation_config.json and chat template: the folder that was published (trainer/release/hf_folder.py
        says
        which files, and what they must hold), which vLLM loads as it is (``--model <dir>``)
        manifest.json.sig   the publisher's signature of manifest.json (trainer/release/signing.py: ECDSA
        P-256
                            with the stack's release signing key in KMS), written before it
        manifest.json       written LAST (format ``aiplat-release-v3``): model name, version, size and
                            sha256 of every file, ``source`` (the folder's URI, the team, the TrainJob and
                            its image digest, the training step), ``serving``
                            (trainer.release.hf_folder.Serving:
                            architecture, dtype, parameter count and weight bytes, layers, attention and
                            KV heads, head dim, max positions, chat template), creation time (UTC)

``version`` is ``<YYYYmmddTHHMMSSZ>-step<N>`` (UTC), so lexicographic order is publication order.
Publishing is an explicit step (``python -m trainer.release.publish``); no training job writes here. Every
object is
written create-only (``If-None-Match: *``, which the artifacts bucket policy requires under ``release/``),
so a published version is never overwritten. A reader accepts a manifest only when its signature verifies
with the trusted public key (:func:`accept_manifest`), before it reads any other file: the sha256 sums
catch corruption, the signature catches tampering; then the files must pass trainer/release/hf_folder.py's
checks
again and give the ``serving`` facts the manifest signed.

Releases the GPT-2-only publisher wrote before (format ``aiplat-release-v2``: the five files of
trainer/export/gpt2.py, ``source`` = run id, checkpoint URI, step) are still read and verified the same way.

Replication to other regions copies objects one by one in no particular order, so a reader can see a
manifest before the files it names: :func:`verify` reports such a release as incomplete
(:class:`ReleaseError`) rather than failing in some other way, and :func:`newest_valid` falls back to the
newest version that verifies. Store outages are not release defects: they raise
:class:`~trainer.errors.StoreUnavailable`, never :class:`ReleaseError`.

No torch, no pickle (the fetch tool's image has neither; the publisher must never need them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import struct
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from trainer.errors import BadInput, BlobNotFound
from trainer.release.adapter import (
    ADAPTER_CONFIG,
    ADAPTER_JSON,
    Adapter,
    BaseRef,
    check_adapter,
    plan_adapter,
)
from trainer.release.hf_folder import (
    CONFIG,
    HEADER_MAX,
    JSON_FILES,
    SAFETENSORS,
    WEIGHTS,
    FolderError,
    Serving,
    check_folder,
    plan_folder,
)
from trainer.release.signing import SIGNATURE_SUFFIX, BadSignature, trusted_key, verify_signature
from trainer.storage.blobstore import Blobs, open_blobs
from trainer.storage.hashing import MANIFEST, is_sha256_hex, sha256_stream

FORMAT = "aiplat-release-v3"
FORMAT_V2 = "aiplat-release-v2"  # the GPT-2-only releases: read, never written
# A LoRA adapter (trainer/release/adapter.py) on a base release: ``adapter`` instead of ``serving``; a fetch
# tool that predates it refuses the format rather than mistaking it for a model.
FORMAT_ADAPTER = "aiplat-adapter-v1"
RELEASE_PREFIX = "release"
GENERATION_CONFIG = "generation_config.json"
TOKENIZER = "tokenizer.json"
TOKENIZER_CONFIG = "tokenizer_config.json"
# The files of a GPT-2 folder of the trainer's (trainer.export.hf), and exactly those of a v2 release.
FILES = (CONFIG, GENERATION_CONFIG, WEIGHTS, TOKENIZER, TOKENIZER_CONFIG)
SIGNATURE = MANIFEST + SIGNATURE_SUFFIX  # manifest.json.sig
VERSION_RE = re.compile(r"^(\d{8}T\d{6}Z)-step(\d+)$")
MODEL_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
# Who a release came from: a team name (infra/queueing/config.py TEAM_NAME), a TrainJob (a Kubernetes
# object name) and its image by digest.
TEAM_RE = re.compile(r"^[a-z]([a-z0-9-]{0,28}[a-z0-9])?$")
JOB_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")


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
    """Where the weights came from: the folder (v2: the checkpoint) published, the training step, and for
    a team's job its team, TrainJob and image digest; ``run_id`` only in v2 releases."""

    uri: str
    step: int
    team: str | None = None
    job: str | None = None
    image_digest: str | None = None
    run_id: str | None = None
    # where ``job`` and ``image_digest`` were read (the job's run record, ``<uri>?versionId=<id>``), and the
    # version of every file read from a versioned bucket (file name -> S3 VersionId); their sha256 are the
    # manifest's ``files``
    run_record: str | None = None
    versions: dict[str, str] | None = None

    def as_json(self) -> dict[str, Any]:
        """The manifest's ``source`` object (v3; ``run_record`` and ``versions`` where known)."""
        out: dict[str, Any] = {
            "uri": self.uri,
            "step": self.step,
            "team": self.team,
            "job": self.job,
            "image_digest": self.image_digest,
        }
        if self.run_record is not None:
            out["run_record"] = self.run_record
        if self.versions:
            out["versions"] = dict(sorted(self.versions.items()))
        return out

    def describe(self) -> str:
        """One phrase for logs: ``team research, job llama-1 (sha256:...)`` or the URI."""
        if self.team is not None:
            job = f", job {self.job}" if self.job else ""
            image = f" ({self.image_digest})" if self.image_digest else ""
            return f"team {self.team}{job}{image}"
        return f"run {self.run_id}" if self.run_id else self.uri


@dataclass(frozen=True)
class Release:
    """A verified release (or, from :func:`trainer.release.publish.publish`, one just written)."""

    root: str
    model_name: str
    version: str
    uri: str
    format: str
    config: dict[str, Any]  # config.json, once its sha256 matched
    files: dict[str, FileEntry]
    source: Source
    serving: Serving | None  # v3: from the manifest, checked against the files; v2: from the files
    created_utc: str
    metrics: dict[str, Any] | None = None  # v2 only: the trainer's metrics at that step
    tokenizer: dict[str, Any] | None = None  # v2 only
    adapter: Adapter | None = None  # adapter releases only (config is then adapter_config.json)

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
def manifest_bytes(
    *,
    model_name: str,
    version: str,
    files: dict[str, FileEntry],
    source: Source,
    serving: Serving | None = None,
    adapter: Adapter | None = None,
    created: datetime | None = None,
) -> bytes:
    """The bytes of a v3 ``manifest.json`` (what the publisher signs), or with ``adapter`` instead of
    ``serving`` of an adapter release's."""
    facts: dict[str, Any] = {"serving": serving.as_json() if serving else None}
    if adapter is not None:
        facts = {"adapter": adapter.as_json()}
    manifest = {
        "format": FORMAT if adapter is None else FORMAT_ADAPTER,
        "model_name": model_name,
        "version": version,
        "created_utc": (created or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "files": {n: {"size": e.size, "sha256": e.sha256} for n, e in sorted(files.items())},
        "source": source.as_json(),
        **facts,
    }
    return json.dumps(manifest, indent=1).encode()


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


def _files(files: Any, fmt: str) -> dict[str, FileEntry]:
    _need(isinstance(files, dict), "files must be an object {name: {size, sha256}}")
    if fmt == FORMAT_V2:
        _need(set(files) == set(FILES), f"files must be exactly {', '.join(FILES)}, not {sorted(files)}")
    entries = {}
    for name in sorted(files):
        e = files[name]
        _need(isinstance(name, str), "files must be named by strings")
        _need(isinstance(e, dict), f"files.{name} must be an object {{size, sha256}}")
        _need(_is_int(e.get("size")) and e["size"] >= 0, f"files.{name}.size must be a byte count")
        _need(is_sha256_hex(e.get("sha256")), f"files.{name}.sha256 must be 64 hex digits")
        entries[name] = FileEntry(e["size"], e["sha256"])
    try:
        plan = (plan_adapter if fmt == FORMAT_ADAPTER else plan_folder)(
            {n: e.size for n, e in entries.items()}
        )
    except FolderError as exc:
        raise ReleaseError(f"{MANIFEST}: files: {exc.reason}") from None
    _need(not plan.skipped, f"files: {plan.skipped} are never published")
    return entries


def _source_v3(src: Any) -> Source:
    _need(isinstance(src, dict), "source must be an object {uri, step, team, job, image_digest}")
    required = {"uri", "step", "team", "job", "image_digest"}
    _need(
        required <= set(src) <= required | {"run_record", "versions"},
        f"source must have uri, step, team, job, image_digest (and run_record, versions), not {sorted(src)}",
    )
    _need(src.get("run_record") is None or isinstance(src["run_record"], str), "source.run_record: a URI")
    versions = src.get("versions")
    _need(
        versions is None
        or (isinstance(versions, dict) and all(isinstance(v, str) and v for v in versions.values())),
        "source.versions must map file names to version ids",
    )
    _need(isinstance(src["uri"], str), "source.uri must be a string")
    _need(_is_int(src["step"]) and src["step"] >= 0, "source.step must be a step number")
    for key, pattern in (("team", TEAM_RE), ("job", JOB_RE), ("image_digest", DIGEST_RE)):
        v = src[key]
        _need(
            v is None or (isinstance(v, str) and pattern.match(v) is not None),
            f"source.{key} must be null or match {pattern.pattern}",
        )
    return Source(
        src["uri"],
        src["step"],
        team=src["team"],
        job=src["job"],
        image_digest=src["image_digest"],
        run_record=src.get("run_record"),
        versions=dict(versions) if versions else None,
    )


def _source_v2(src: Any) -> Source:
    _need(isinstance(src, dict), "source must be an object {run_id, checkpoint_uri, step}")
    _need(isinstance(src.get("run_id"), str), "source.run_id must be a string")
    _need(isinstance(src.get("checkpoint_uri"), str), "source.checkpoint_uri must be a string")
    _need(_is_int(src.get("step")) and src["step"] >= 0, "source.step must be a step number")
    return Source(src["checkpoint_uri"], src["step"], run_id=src["run_id"])


def parse_manifest(raw: bytes, root: str, model_name: str, version: str, uri: str) -> Release:
    """The fields of a manifest (v3, or v2), type-checked, without the signature check: for the
    publisher's own manifest, just written; readers go through :func:`accept_manifest`."""
    try:
        m = json.loads(raw)
    except ValueError as exc:
        raise ReleaseError(f"{MANIFEST} is not valid JSON ({exc})") from None
    _need(isinstance(m, dict), "must be a JSON object")
    fmt = m.get("format")
    _need(
        fmt in (FORMAT, FORMAT_V2, FORMAT_ADAPTER),
        f"format {fmt!r} is not {FORMAT!r} (or {FORMAT_V2!r}, {FORMAT_ADAPTER!r})",
    )
    _need(m.get("model_name") == model_name, f"model_name {m.get('model_name')!r} is not {model_name!r}")
    _need(m.get("version") == version, f"version {m.get('version')!r} is not the folder's {version!r}")
    entries = _files(m.get("files"), fmt)
    source = _source_v2(m.get("source")) if fmt == FORMAT_V2 else _source_v3(m.get("source"))
    vm = VERSION_RE.match(version)
    step_ok = vm is not None and int(vm.group(2)) == source.step
    _need(step_ok, f"source.step {source.step} is not the version's step")
    serving = adapter = None
    metrics = tokenizer = None
    if fmt == FORMAT_ADAPTER:
        try:
            adapter = Adapter.from_json(m.get("adapter"))
        except FolderError as exc:
            raise ReleaseError(f"{MANIFEST}: {exc.reason}") from None
    elif fmt == FORMAT:
        try:
            serving = Serving.from_json(m.get("serving"))
        except FolderError as exc:
            raise ReleaseError(f"{MANIFEST}: {exc.reason}") from None
    else:
        metrics, tokenizer = m.get("metrics"), m.get("tokenizer")
        _need(metrics is None or isinstance(metrics, dict), "metrics must be an object or null")
        _need(tokenizer is None or isinstance(tokenizer, dict), "tokenizer must be an object or null")
    _need(isinstance(m.get("created_utc"), str), "created_utc must be a string")
    return Release(
        root=root,
        model_name=model_name,
        version=version,
        uri=uri,
        format=fmt,
        config={},
        files=entries,
        source=source,
        serving=serving,
        created_utc=m["created_utc"],
        metrics=metrics,
        tokenizer=tokenizer,
        adapter=adapter,
    )


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
    small: dict[str, bytes] = {}  # the JSON files, parsed once every sha256 matched
    heads: dict[str, _Head] = {}  # each safetensors file's header
    if download_to is not None:
        download_to.mkdir(parents=True, exist_ok=True)
    for name, entry in rel.files.items():
        buf = bytearray()
        if SAFETENSORS.match(name):
            keep: Any = heads.setdefault(name, _Head())
        elif name in JSON_FILES or name in ADAPTER_JSON:
            keep = buf.extend
        else:
            keep = None  # opaque (merges.txt, tokenizer.model, a Jinja template): hashed only
        if download_to is not None:
            part = download_to / f".{name}.part"
            with store.open(name) as src, open(part, "wb") as out:
                sha, _ = sha256_stream(
                    src, lambda b, keep=keep, out=out: (keep(b) if keep else None, out.write(b))
                )
        else:
            with store.open(name) as f:
                sha, _ = sha256_stream(f, keep)
        if sha != entry.sha256:
            raise ReleaseError(f"{name}: sha256 does not match {MANIFEST} (corrupt or replaced)")
        if download_to is not None:
            part.replace(download_to / name)
        if name in JSON_FILES or name in ADAPTER_JSON:
            small[name] = bytes(buf)

    def read(name: str) -> bytes:
        return small[name]

    if rel.adapter is not None:
        rel = _checked_adapter(rel, small, heads)
    else:
        try:
            serving = check_folder(
                sorted(rel.files),
                {n: e.size for n, e in rel.files.items()},
                read,
                lambda n: bytes(heads[n].data),
            )
        except FolderError as exc:
            raise ReleaseError(exc.reason) from None
        if rel.serving is not None:
            # shape_check records what the publisher ran (the full check needs torch; readers run the generic
            # one)
            serving = dataclasses.replace(serving, shape_check=rel.serving.shape_check)
        if rel.serving is not None and serving != rel.serving:
            diff = sorted(k for k, v in serving.as_json().items() if rel.serving.as_json().get(k) != v)
            raise ReleaseError(
                f"the files do not give the serving facts {MANIFEST} signed ({', '.join(diff)})"
            )
        rel = dataclasses.replace(rel, config=json.loads(small[CONFIG]), serving=serving)
    if download_to is not None:
        (download_to / SIGNATURE).write_bytes(signature)
        (download_to / MANIFEST).write_bytes(raw)
    return rel


def _checked_adapter(rel: Release, small: dict[str, bytes], heads: dict[str, _Head]) -> Release:
    """An adapter release whose files matched their sha256: checked again (generic: the base is another
    release) and giving the facts the manifest signed."""
    assert rel.adapter is not None
    try:
        facts = check_adapter(
            sorted(rel.files), {n: e.size for n, e in rel.files.items()}, small.__getitem__,
            lambda n: bytes(heads[n].data),
        )  # fmt: skip
    except FolderError as exc:
        raise ReleaseError(exc.reason) from None
    signed = rel.adapter
    facts = dataclasses.replace(
        facts, base=signed.base, base_architecture=signed.base_architecture, shape_check=signed.shape_check
    )
    if facts != signed:
        diff = sorted(k for k, v in facts.as_json().items() if signed.as_json().get(k) != v)
        raise ReleaseError(f"the files do not give the adapter facts {MANIFEST} signed ({', '.join(diff)})")
    return dataclasses.replace(rel, config=json.loads(small[ADAPTER_CONFIG]))


def read_base(root: str, model_name: str, version: str, public_key: Any) -> tuple[BaseRef, bytes]:
    """A base release for an adapter, read as little as that needs: its signed manifest (accepted with
    ``public_key``) and its ``config.json`` (by the sha256 the manifest names); returns the reference the
    adapter's manifest records and the config's bytes. :class:`ReleaseError` when there is no
    such release, it does not verify, or it is an adapter itself."""
    if not VERSION_RE.match(version or ""):
        raise ReleaseError(f"{version!r} is not a release version (<YYYYmmddTHHMMSSZ>-step<N>)")
    store = versions_store(root, model_name).child(version)
    try:
        raw, signature = store.read(MANIFEST), store.read(SIGNATURE)
    except BlobNotFound:
        raise ReleaseError(
            f"no signed release {model_name}/{version} under {root.rstrip('/')}/{RELEASE_PREFIX}/ "
            f"(publish the base first; its versions: {list_versions(root, model_name)[-3:] or 'none'})"
        ) from None
    rel = accept_manifest(raw, signature, public_key, root, model_name, version, store.uri)
    if rel.adapter is not None:
        raise ReleaseError(f"{model_name}/{version} is an adapter; an adapter's base is a model release")
    config = store.read(CONFIG)
    if hashlib.sha256(config).hexdigest() != rel.files[CONFIG].sha256:
        raise ReleaseError(f"{CONFIG}: sha256 does not match {MANIFEST} (corrupt or replaced)")
    return BaseRef(model_name, version, hashlib.sha256(raw).hexdigest()), config


def check_base_folder(adapter: Release, base_dir: Path, public_key: Any) -> None:
    """Raise :class:`ReleaseError` unless ``base_dir`` (a folder the fetch tool wrote: the release and its
    ``manifest.json`` and signature) holds the base release ``adapter`` was published for: its manifest's
    signature verifies and its sha256 is the one the adapter's manifest recorded."""
    assert adapter.adapter is not None and adapter.adapter.base is not None
    want = adapter.adapter.base
    try:
        raw, signature = (base_dir / MANIFEST).read_bytes(), (base_dir / SIGNATURE).read_bytes()
    except OSError as exc:
        why = exc.strerror or exc
        raise ReleaseError(f"--base-dir {base_dir}: no fetched release there ({why})") from None
    try:
        verify_signature(raw, signature, public_key)
    except BadSignature as exc:
        raise ReleaseError(f"--base-dir {base_dir}: {MANIFEST}: {exc.reason}") from None
    got = hashlib.sha256(raw).hexdigest()
    if got != want.manifest_sha256:
        try:
            m = json.loads(raw)
            which = f"{m.get('model_name')}/{m.get('version')}"
        except ValueError:
            which = "another release"
        raise ReleaseError(
            f"--base-dir {base_dir} holds {which} (manifest sha256 {got[:12]}...), the adapter was published "
            f"for {want.model_name}/{want.version} (sha256 {want.manifest_sha256[:12]}...): serve it on that "
            "base"
        )


def verify(root: str, model_name: str, version: str, public_key: Any = None) -> Release:
    """The release at ``<root>/release/<model_name>/<version>`` if it is signed, complete and intact
    (manifest signature verified with ``public_key``, default :func:`trainer.release.signing.trusted_key`;
    manifest
    accepted, every file present with its size and sha256, the folder passing trainer/release/hf_folder.py's
    checks
    with the serving facts the manifest signed); else :class:`ReleaseError` with the reason."""
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
