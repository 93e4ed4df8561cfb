"""Run records read back from the checkpoint store (``trainer/run/runrecord.py`` writes them under
``<checkpoint uri>/run-records/``), with the trainer's own store client: one job's, or every job's of a team
(``s3://<checkpoints bucket>/<team>/checkpoints/<job>/run-records/``, the job contract's
``AIPLAT_CHECKPOINT_URI``)."""

from __future__ import annotations

import json
from typing import Any

from infra.core.errors import PlatformError
from trainer.errors import BlobNotFound, TrainerError
from trainer.run.runrecord import PREFIX
from trainer.storage.blobstore import Blobs, open_blobs


class RecordStoreError(PlatformError):
    """The records' store refused or did not answer (exit 6, ``EXIT_AWS``)."""

    exit_code = 6

    def __init__(self, root: str, exc: Exception) -> None:
        super().__init__(
            f"run records under {root}: {exc}; fix: check your AWS credentials (their role must read the "
            "team's prefix of the checkpoints bucket) and that the stack is deployed"
        )


def _read(store: Blobs, skipped: list[str]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(store.list()):
        if "/" in name or not name.endswith(".json"):
            continue
        try:
            doc = json.loads(store.read(name))
        except (ValueError, BlobNotFound) as exc:  # not a record (or gone): say so, go on
            skipped.append(f"{store.url(name)}: {exc}")
            continue
        if isinstance(doc, dict):
            out[name] = doc
    return out


def job_records(checkpoint_uri: str, skipped: list[str], *, region: str = "") -> dict[str, dict[str, Any]]:
    """The records of the run at ``checkpoint_uri``, by object name (``<attempt>.end.json`` ...). Raises the
    trainer's ``StoreUnavailable`` / ``BadInput`` when the store refuses or does not answer."""
    store = open_blobs(checkpoint_uri.rstrip("/"), region=region, max_attempts=2).child(PREFIX)
    return _read(store, skipped)


def team_records(
    checkpoints_uri: str, skipped: list[str], *, region: str = ""
) -> dict[str, dict[str, dict[str, Any]]]:
    """Every job's records under ``checkpoints_uri`` (a team's ``<bucket>/<team>/checkpoints``): job -> its
    records by object name; jobs without records are left out. ``RecordStoreError`` when the store refuses
    or does not answer."""
    root = open_blobs(checkpoints_uri.rstrip("/"), region=region, max_attempts=2)
    out = {}
    try:
        for job in root.list_dirs():
            records = _read(root.child(f"{job}/{PREFIX}"), skipped)
            if records:
                out[job] = records
    except TrainerError as exc:
        raise RecordStoreError(checkpoints_uri, exc) from exc
    return out
