"""Run records: what a training attempt was launched with, where it ran, and how it ended.

Rank 0 writes ``<checkpoint.uri>/run-records/<attempt>.json`` at start (``"status": "running"``) and
replaces it when ``Trainer.run`` returns (``"finished"``, exit code and reason); a record left ``running``
means a crash, a kill or a store that did not answer. Records are side writes (``trainer/sidewrites.py``,
abandoned after ``checkpoint.side_write_timeout_s``), so a hanging store never holds up a step; they sit
under the run's prefix (same IAM grant and lifecycle), never under ``release/``.

Fields: ``config`` (the whole job config), ``image_digest`` (``$AIPLAT_IMAGE_DIGEST``, set by the
training runtime to the image digest it launched), ``world_size``, ``nodes`` (``$NODE_NAME`` from the
Kubernetes downward API, else the host name, of every rank), ``dataset`` (source, sha256 of
``index.json``, fingerprint, samples, tokenizer), ``steps`` (target, resumed from, first and last step of
this attempt), ``final_metrics`` (the last step's record), ``checkpoints`` (root, the ones this attempt
committed, the newest), ``artifacts`` (this record, the metrics log), start/end times (UTC) and ``exit``.
"""

from __future__ import annotations

import json
import os
import socket
from datetime import UTC, datetime
from typing import Any

from trainer import exitcodes
from trainer.blobstore import Blobs, open_blobs
from trainer.sidewrites import SideWrite, SideWriter

FORMAT = "aiplat-run-record-v1"
PREFIX = "run-records"
IMAGE_DIGEST_ENV = "AIPLAT_IMAGE_DIGEST"


def node_name() -> str:
    """This process's node: ``$NODE_NAME`` (downward API ``spec.nodeName``), else the host name."""
    return os.environ.get("NODE_NAME") or socket.gethostname()


def utc_now() -> str:
    """ISO 8601 UTC time with a ``Z``."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RunRecord:
    """The record of one attempt; only rank 0 creates one. Writes are best effort and asynchronous
    (``writer``): a failure is logged, training goes on (the checkpoints are what the run cannot do
    without)."""

    def __init__(self, store: Blobs, attempt: str, fields: dict[str, Any], writer: SideWriter) -> None:
        self.store = store
        self.writer = writer
        self.key = f"{attempt}.json"
        self.uri = store.url(self.key)
        self.doc: dict[str, Any] = {
            "format": FORMAT,
            "attempt": attempt,
            "status": "running",
            "started_utc": utc_now(),
            "ended_utc": None,
            "exit": None,
            "image_digest": os.environ.get(IMAGE_DIGEST_ENV) or None,
            **fields,
        }
        self.doc.setdefault("artifacts", {})["run_record"] = self.uri

    @classmethod
    def open(
        cls,
        checkpoint_uri: str,
        attempt: str,
        fields: dict[str, Any],
        writer: SideWriter,
        **store_args: Any,
    ) -> RunRecord | None:
        """A record under ``checkpoint_uri`` (``None`` when checkpointing is off: there is no run prefix)."""
        if not checkpoint_uri:
            return None
        return cls(open_blobs(checkpoint_uri, **store_args).child(PREFIX), attempt, fields, writer)

    def write(self) -> SideWrite:
        """Queue a write of the document as it is now; returns at once (the writer logs a failure)."""
        data = json.dumps(self.doc, indent=1, default=str).encode()
        return self.writer.submit(
            f"the run record {self.uri} ({self.doc['status']})", lambda: self.store.write(self.key, data)
        )

    def start(self) -> SideWrite:
        """The record at the start of training."""
        return self.write()

    def finish(self, code: int, reason: str, **fields: Any) -> SideWrite:
        """The record at the end: exit code and reason, end time, and ``fields`` (steps, final metrics,
        checkpoints...)."""
        self.doc.update(fields)
        self.doc.update(
            status="finished",
            ended_utc=utc_now(),
            exit={"code": code, "name": exitcodes.name(code), "reason": reason},
        )
        return self.write()
