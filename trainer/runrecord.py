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

On the cluster, ``logs`` and ``workload`` link the record to the rest of the run, from what the training
runtime gives the pod through the downward API (infra/training/documents/runtime.py ``pod_env``): rank 0's
CloudWatch Logs group and stream (the other ranks' streams share the pod name's prefix up to the rank),
and the Kueue queue, priority class and TrainJob with the submission time and the time from submission to
this attempt's start (queue wait plus pod start-up). Kueue's exact admission time is in the Workload's
``Admitted`` condition (``aiplat train list``); Kueue does not give it to the pods.
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


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


def log_links() -> dict[str, Any] | None:
    """Where this pod's log lands (``$AIPLAT_LOG_GROUP`` / ``$AIPLAT_LOG_STREAM``); None off the cluster."""
    if not _env("AIPLAT_LOG_GROUP"):
        return None
    return {
        "cloudwatch_log_group": _env("AIPLAT_LOG_GROUP"),
        "cloudwatch_log_stream": _env("AIPLAT_LOG_STREAM"),
        "pod": _env("POD_NAME"),
        "namespace": _env("POD_NAMESPACE"),
    }


def workload_links(started_utc: str) -> dict[str, Any] | None:
    """The run's TrainJob and Kueue queue, and how long it waited from submission to ``started_utc``;
    None when the pod has no TrainJob (off the cluster)."""
    if not _env("AIPLAT_TRAINJOB"):
        return None
    submitted = _env("AIPLAT_SUBMITTED_AT")
    waited = None
    if submitted:
        try:
            t0 = datetime.strptime(submitted, "%Y-%m-%dT%H:%M:%SZ")
            t1 = datetime.strptime(started_utc, "%Y-%m-%dT%H:%M:%SZ")
            waited = int((t1 - t0).total_seconds())
        except ValueError:  # a hand-written annotation: keep it, without a duration
            waited = None
    return {
        "trainjob": _env("AIPLAT_TRAINJOB"),
        "namespace": _env("POD_NAMESPACE"),
        "queue": _env("AIPLAT_QUEUE"),
        "priority_class": _env("AIPLAT_PRIORITY_CLASS"),
        "submitted_utc": submitted,
        "waited_s": waited,
    }


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
        self.doc.setdefault("logs", log_links())
        self.doc.setdefault("workload", workload_links(self.doc["started_utc"]))
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
