"""The checkpoint manifest: its format, a parser that type-checks every field, and the resume rules.

Pure Python (no torch, no I/O) so the launcher, the trainer and ``trainer.release.publish`` read it the same
way;
a manifest with wrong value types is a reason to skip the checkpoint (:class:`ManifestError`), never a
``TypeError``.

Layout of one checkpoint (format v2)::

    step_000000012/manifest.json       written last, create-only; names the attempt below
    step_000000012/<attempt>/.metadata, __<rank>_0.distcp, ...   DCP's files

One folder per attempt, so a leftover process of an earlier attempt never overwrites files a manifest
vouches for. Format v1 (DCP's files in the step folder) is still read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from trainer.errors import BadInput
from trainer.storage.hashing import MANIFEST, is_sha256_hex

FORMAT_V1 = "trainer-ckpt-v1"
FORMAT = "trainer-ckpt-v2"
ATTEMPT_RE = re.compile(r"^attempt-\d{8}T\d{6}Z-[0-9a-f]{6}$")
# Model fields that must match to resume (``size`` is only a preset name for them).
MODEL_FIELDS = ("n_layer", "n_head", "d_model", "seq_len", "vocab_size", "dropout")


class ManifestError(ValueError):
    """Why a manifest cannot vouch for its checkpoint (one line)."""


@dataclass(frozen=True)
class FileEntry:
    """One DCP file as the manifest records it."""

    size: int
    sha256: str


@dataclass(frozen=True)
class CheckpointManifest:
    """A type-checked manifest. ``attempt`` is "" for format v1 (files in the step folder)."""

    step: int
    attempt: str
    world_size: int
    files: dict[str, FileEntry]
    config: dict[str, Any]
    run_id: str
    data: dict[str, Any] | None
    metrics: dict[str, Any] | None
    raw: dict[str, Any]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _need(cond: bool, what: str) -> None:
    if not cond:
        raise ManifestError(f"{MANIFEST}: {what}")


def parse_manifest(raw: bytes, folder_step: int) -> CheckpointManifest:
    """Parse and type-check a manifest read from the folder of ``folder_step``."""
    import json

    try:
        m = json.loads(raw)
    except ValueError as exc:
        raise ManifestError(f"{MANIFEST} is not valid JSON ({exc})") from None
    _need(isinstance(m, dict), "must be a JSON object")
    fmt = m.get("format")
    _need(fmt in (FORMAT, FORMAT_V1), f"format {fmt!r} is not {FORMAT!r}")
    _need(_is_int(m.get("step")), f"step must be an integer, not {m.get('step')!r}")
    _need(m["step"] == folder_step, f"says step {m['step']}, the folder is step {folder_step}")
    attempt = m.get("attempt", "")
    if fmt == FORMAT:
        _need(
            isinstance(attempt, str) and bool(ATTEMPT_RE.match(attempt)), f"attempt {attempt!r} is not valid"
        )
    else:
        attempt = ""
    _need(_is_int(m.get("world_size")) and m["world_size"] >= 1, "world_size must be a positive integer")
    files = m.get("files")
    _need(isinstance(files, dict) and bool(files), "files must be an object {name: {size, sha256}}")
    entries: dict[str, FileEntry] = {}
    for name, e in files.items():
        _need("/" not in name and name not in ("", ".", ".."), f"file name {name!r} is not a plain name")
        _need(isinstance(e, dict), f"files.{name} must be an object {{size, sha256}}, not {type(e).__name__}")
        _need(_is_int(e.get("size")) and e["size"] >= 0, f"files.{name}.size must be a byte count")
        _need(is_sha256_hex(e.get("sha256")), f"files.{name}.sha256 must be 64 hex digits")
        entries[name] = FileEntry(e["size"], e["sha256"])
    _need(".metadata" in entries, "lists no DCP .metadata")
    config = m.get("config")
    _need(isinstance(config, dict), "config must be an object")
    _need(isinstance(config.get("model"), dict), "config.model must be an object")
    run_id = m.get("run_id", "")
    _need(isinstance(run_id, str), "run_id must be a string")
    data = m.get("data")
    _need(data is None or isinstance(data, dict), "data must be an object or null")
    if isinstance(data, dict):
        for key in ("fingerprint",):
            _need(data.get(key) is None or isinstance(data[key], str), f"data.{key} must be a string")
        for key in ("num_samples", "global_batch"):
            _need(data.get(key) is None or _is_int(data[key]), f"data.{key} must be an integer")
    metrics = m.get("metrics")
    _need(metrics is None or isinstance(metrics, dict), "metrics must be an object or null")
    return CheckpointManifest(
        step=m["step"],
        attempt=attempt,
        world_size=m["world_size"],
        files=entries,
        config=config,
        run_id=run_id,
        data=data,
        metrics=metrics,
        raw=m,
    )


def check_model(manifest: CheckpointManifest, model: dict[str, Any], where: str) -> None:
    """Refuse (one :class:`BadInput` line naming the fields) a checkpoint of another model."""
    saved = manifest.config["model"]
    diff = [k for k in MODEL_FIELDS if saved.get(k) != model.get(k)]
    if diff:
        parts = ", ".join(
            f"model.{k}={saved.get(k)!r} in the checkpoint, {model.get(k)!r} in the config" for k in diff
        )
        raise BadInput(
            f"{where} is for another model: {parts} (set the model back, or start a new checkpoint.uri)"
        )


def check_data(
    manifest: CheckpointManifest,
    data: dict[str, Any],
    *,
    allow_dataset_change: bool,
    allow_batch_change: bool,
    where: str,
) -> list[str]:
    """Resume rules for the sample position. ``data`` is today's ``{fingerprint, num_samples,
    global_batch}`` (``global_batch`` may be ``None`` when the world size is not known yet). Returns the
    warnings to log for allowed changes; raises :class:`BadInput` for refused ones."""
    saved = manifest.data or {}
    notes: list[str] = []
    if not saved.get("fingerprint"):
        return [f"{where} has no dataset fingerprint (older trainer): dataset and global batch not checked"]
    offset = (manifest.metrics or {}).get("global_offset")
    at = f"global sample offset {offset}" if offset is not None else "the saved sample offset"
    if saved["fingerprint"] != data.get("fingerprint"):
        what = (
            f"dataset changed since {where} (index fingerprint {saved['fingerprint'][:12]} -> "
            f"{str(data.get('fingerprint'))[:12]}, {saved.get('num_samples')} -> {data.get('num_samples')} "
            "samples per epoch)"
        )
        if not allow_dataset_change:
            raise BadInput(
                f"{what}: {at} would point at other samples; use the same data.source, or set "
                "checkpoint.allow_dataset_change=true to continue on the new data"
            )
        notes.append(
            f"resuming with a changed dataset: {what}; {at} continues in a new sample order over the new "
            "data (samples already seen may repeat, others may be skipped this epoch)"
        )
    new_batch = data.get("global_batch")
    if new_batch is not None and saved.get("global_batch") not in (None, new_batch):
        what = f"global batch {saved['global_batch']} -> {new_batch} samples per step since {where}"
        if not allow_batch_change:
            raise BadInput(
                f"{what} (train.micro_batch x train.grad_accum x world size): keep it, or set "
                "checkpoint.allow_batch_change=true (the LR schedule still counts steps, so the tokens per "
                "schedule phase change)"
            )
        notes.append(f"resuming with another {what}; {at} continues, each step now takes {new_batch} samples")
    return notes
