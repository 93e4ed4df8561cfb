"""The release an infer stack is about to serve, as ``aiplat rollout`` reads it before the update: the signed
manifest in the region's replica bucket, accepted with the trainer's own reader (trainer/release/manifest.py,
the one
definition of the format; torch-free) against the train stack's release signing public key, reduced to what
serving needs (``ReleaseFacts``). Nothing but the manifest is read (and, for a release of the older GPT-2
format, its config.json and the weights' 8-byte header length).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from trainer.errors import BadInput
from trainer.release.manifest import (
    CONFIG,
    FORMAT_V2,
    RELEASE_PREFIX,
    SIGNATURE,
    VERSION_RE,
    WEIGHTS,
    ReleaseError,
    accept_manifest,
)
from trainer.release.signing import load_public_key

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class ReleaseFacts:
    """What a release's manifest says serving needs (trainer/release/hf_folder.py ``Serving``)."""

    version: str
    architecture: str
    model_type: str | None
    dtype: str
    parameters: int
    weight_bytes: int
    layers: int | None
    attention_heads: int | None
    kv_heads: int | None
    head_dim: int | None
    max_positions: int | None
    chat_template: bool
    manifest_sha256: str = ""  # of the signed manifest.json read ("" for a folder): what adapters record


@dataclass(frozen=True)
class AdapterFacts:
    """What an adapter release's manifest (or an adapter folder, the publisher's check) says serving needs
    (trainer/release/adapter.py ``Adapter``). ``is_adapter`` false: the release is a model, not an adapter
    (the other fields then empty)."""

    version: str
    is_adapter: bool
    base_name: str = ""
    base_version: str = ""
    base_manifest_sha256: str = ""
    base_architecture: str | None = None
    rank: int = 0
    alpha: float = 0.0
    target_modules: list[str] | str = ""
    modules: int = 0
    dtype: str = ""
    parameters: int = 0


class ReleaseUnreadable(Exception):
    """The release is not there, not signed by the release key, or its manifest is malformed."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _get(s3: Any, bucket: str, key: str, range_: str | None = None) -> bytes | None:
    try:
        extra = {"Range": range_} if range_ else {}
        return s3.get_object(Bucket=bucket, Key=key, **extra)["Body"].read()
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
            return None
        raise


def list_versions(s3: Any, bucket: str, model: str) -> list[str]:
    """Release versions under ``s3://<bucket>/release/<model>/``, oldest first. Raises ClientError /
    BotoCoreError when S3 refuses or does not answer."""
    base = f"{RELEASE_PREFIX}/{model}/"
    names: list[str] = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=base, Delimiter="/"):
        names += [p["Prefix"][len(base) :].rstrip("/") for p in page.get("CommonPrefixes", [])]
    return sorted(n for n in names if VERSION_RE.match(n))


def _v2_facts(s3: Any, bucket: str, prefix: str, version: str, files: dict[str, Any]) -> ReleaseFacts:
    """A GPT-2 release of the older format: its geometry from config.json (sha256-checked against the signed
    manifest), its float32 parameter count from the weights file's size less its header."""
    raw = _get(s3, bucket, f"{prefix}/{CONFIG}")
    if raw is None or hashlib.sha256(raw).hexdigest() != files[CONFIG].sha256:
        raise ReleaseUnreadable(f"{CONFIG} is missing or does not match {MANIFEST}")
    cfg = json.loads(raw)
    head = _get(s3, bucket, f"{prefix}/{WEIGHTS}", "bytes=0-7")
    if head is None or len(head) < 8:
        raise ReleaseUnreadable(f"{WEIGHTS} is missing or shorter than its header")
    data = files[WEIGHTS].size - 8 - struct.unpack("<Q", head)[0]
    heads, hidden = cfg["n_head"], cfg["n_embd"]
    return ReleaseFacts(
        version=version,
        architecture=cfg["architectures"][0],
        model_type=cfg.get("model_type"),
        dtype="float32",
        parameters=data // 4,
        weight_bytes=data,
        layers=cfg["n_layer"],
        attention_heads=heads,
        kv_heads=heads,
        head_dim=hidden // heads,
        max_positions=cfg["n_positions"],
        chat_template=False,
    )


def facts_of(version: str, s: Any) -> ReleaseFacts:
    """The serving facts of a ``Serving`` (trainer/release/hf_folder.py) as the fit check reads them."""
    return ReleaseFacts(
        version=version,
        architecture=s.architecture,
        model_type=s.model_type,
        dtype=s.dtype,
        parameters=s.parameters,
        weight_bytes=s.weight_bytes,
        layers=s.layers,
        attention_heads=s.attention_heads,
        kv_heads=s.kv_heads,
        head_dim=s.head_dim,
        max_positions=s.max_positions,
        chat_template=s.chat_template,
    )


def folder_facts(from_uri: str) -> ReleaseFacts:
    """What the publisher would decide about the Hugging Face folder at ``from_uri`` (a directory or
    ``s3://``), with the same check (trainer/release/check.py: every tensor against the architecture's own
    model); :class:`ReleaseUnreadable` with the publisher's one-line refusal."""
    from trainer.release.check import check_source

    try:
        serving, _ = check_source(from_uri)
    except BadInput as exc:
        raise ReleaseUnreadable(str(exc)) from None
    return facts_of(from_uri, serving)


def _accepted(s3: Any, bucket: str, model: str, version: str, public_key_pem: str) -> tuple[Any, bytes]:
    """The release (trainer/release/manifest.py ``Release``) of ``release/<model>/<version>/`` once its
    manifest's signature verified with the PEM public key, and the manifest's bytes."""
    prefix = f"{RELEASE_PREFIX}/{model}/{version}"
    raw, sig = _get(s3, bucket, f"{prefix}/{MANIFEST}"), _get(s3, bucket, f"{prefix}/{SIGNATURE}")
    if raw is None or sig is None:
        missing = MANIFEST if raw is None else SIGNATURE
        raise ReleaseUnreadable(f"no {missing} (not published, or not replicated here yet)")
    try:
        key = load_public_key(public_key_pem.encode())
        rel = accept_manifest(raw, sig, key, f"s3://{bucket}", model, version, f"s3://{bucket}/{prefix}")
    except (ReleaseError, BadInput) as exc:
        raise ReleaseUnreadable(str(exc)) from None
    return rel, raw


def read_release(s3: Any, bucket: str, model: str, version: str, public_key_pem: str) -> ReleaseFacts:
    """The serving facts of ``release/<model>/<version>/`` once its manifest's signature verified with the
    PEM public key; :class:`ReleaseUnreadable` says why not (an adapter release too: it is no model). S3
    errors other than a missing key pass."""
    rel, raw = _accepted(s3, bucket, model, version, public_key_pem)
    if rel.adapter is not None:
        base = rel.adapter.base
        raise ReleaseUnreadable(
            f"a LoRA adapter release (for base {base.model_name}/{base.version}), not a model: serve it "
            "under inference.models.<its base's model>.adapters"
        )
    if rel.format == FORMAT_V2 or rel.serving is None:
        facts = _v2_facts(s3, bucket, f"{RELEASE_PREFIX}/{model}/{version}", version, rel.files)
    else:
        facts = facts_of(version, rel.serving)
    return replace(facts, manifest_sha256=hashlib.sha256(raw).hexdigest())


def adapter_facts(version: str, adapter: Any) -> AdapterFacts:
    """The facts of a trainer/release/adapter.py ``Adapter`` (None: the release is a model)."""
    if adapter is None:
        return AdapterFacts(version=version, is_adapter=False)
    base = adapter.base
    return AdapterFacts(
        version=version,
        is_adapter=True,
        base_name=base.model_name if base else "",
        base_version=base.version if base else "",
        base_manifest_sha256=base.manifest_sha256 if base else "",
        base_architecture=adapter.base_architecture,
        rank=adapter.rank,
        alpha=adapter.alpha,
        target_modules=adapter.target_modules,
        modules=adapter.modules,
        dtype=adapter.dtype,
        parameters=adapter.parameters,
    )


def read_adapter(s3: Any, bucket: str, name: str, version: str, public_key_pem: str) -> AdapterFacts:
    """The adapter facts of ``release/<name>/<version>/`` once its manifest's signature verified (not
    ``is_adapter`` when it is a model release); :class:`ReleaseUnreadable` says why not."""
    rel, _ = _accepted(s3, bucket, name, version, public_key_pem)
    return adapter_facts(version, rel.adapter)


def is_adapter_folder(from_uri: str) -> bool:
    """Whether the folder at ``from_uri`` is a LoRA adapter, as the publisher tells
    (trainer/release/check.py); :class:`ReleaseUnreadable` when it holds nothing."""
    from trainer.release.check import is_adapter_folder as is_adapter

    try:
        return is_adapter(from_uri)
    except BadInput as exc:
        raise ReleaseUnreadable(str(exc)) from None


def adapter_folder_facts(from_uri: str, base: str, release_root: str, public_key: str | None) -> AdapterFacts:
    """What the publisher would decide about the LoRA adapter folder at ``from_uri`` published for the base
    release ``base`` (``NAME@VERSION`` under ``release_root``, its manifest verified with the PEM file
    ``public_key``, default ``AIPLAT_RELEASE_PUBLIC_KEY``): the same check (trainer/release/adapter.py, every
    module and shape against the base's own model); :class:`ReleaseUnreadable` with the publisher's
    refusal."""
    from trainer.release.check import check_adapter_source
    from trainer.release.publish import base_release
    from trainer.release.signing import trusted_key

    try:
        ref, config = base_release(base, release_root, trusted_key(public_key))
        adapter = check_adapter_source(from_uri, config)
    except BadInput as exc:
        raise ReleaseUnreadable(str(exc)) from None
    return adapter_facts(from_uri, replace(adapter, base=ref))


def job_run_record(bucket: str, team: str, job: str) -> tuple[str, dict[str, Any]]:
    """(URI, document) of the run record the publisher takes a team job's provenance from: the newest of a
    finished attempt (exit code 0) under ``<team>/checkpoints/<job>/run-records/`` of ``bucket``
    (trainer/release/publish.py ``read_run_record``); :class:`ReleaseUnreadable` when there is none."""
    from trainer.release.publish import CHECKPOINTS, RUN_RECORDS, read_run_record

    try:
        where, doc = read_run_record(f"s3://{bucket}/{team}/{CHECKPOINTS}/{job}/{RUN_RECORDS}", job)
    except BadInput as exc:
        raise ReleaseUnreadable(str(exc)) from None
    return where.partition("?")[0], doc


def newest_readable(
    s3: Any,
    bucket: str,
    model: str,
    versions: list[str],
    public_key_pem: str,
    read: Callable[[Any, str, str, str, str], Any] = read_release,
) -> tuple[Any, list[str]]:
    """The newest of ``versions`` whose manifest is accepted by ``read`` (what ``latest`` resolves to, as far
    as the manifest tells; ``read_release`` or ``read_adapter``), and why each newer one was not."""
    skipped = []
    for version in reversed(versions):
        try:
            return read(s3, bucket, model, version, public_key_pem), skipped
        except ReleaseUnreadable as exc:
            skipped.append(f"{version}: {exc.reason}")
    return None, skipped


S3_ERRORS = (ClientError, BotoCoreError)  # what the caller reports as the store refusing or not answering
