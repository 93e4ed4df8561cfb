"""Run records: what a training attempt was launched with, where it ran, what it used, who launched it and
how it ended.

Rank 0 writes two objects per attempt, each created once and never replaced: ``<checkpoint.uri>/run-records/
<attempt>.start.json`` when training starts (``"status": "running"``) and ``<attempt>.end.json`` when
``Trainer.run`` returns (``"finished"``, exit code and reason, GPU hours). Both are written with
``If-None-Match: *`` (S3 conditional writes), and the stack's bucket and IAM policies deny any other write,
and every delete, under ``*/run-records/*`` (infra/storage/documents.py ``record_statements``): a job can add
the records of its own attempts but not rewrite or remove one, its own included. An attempt with a start
record and no end record crashed, was killed, or its store did not answer. Records are side writes
(``trainer/checkpoint/sidewrites.py``, abandoned after ``checkpoint.side_write_timeout_s``), so a hanging
store never
holds up a step; they sit under the run's prefix, never under ``release/``.

Fields: ``config`` (the whole job config), ``image_digest`` (``$AIPLAT_IMAGE_DIGEST``, set by the
training runtime to the image digest it launched), ``world_size``, ``nodes`` (``$NODE_NAME`` from the
Kubernetes downward API, else the host name, of every rank), ``resources`` (node count, GPUs per node, wall
seconds and GPU hours = nodes x GPUs per node x wall time), ``submitted_by`` (the ``aiplat.io/submitted-by``
annotation ``aiplat train submit`` puts on the TrainJob and its pods: the submitter's AWS identity),
``dataset`` (source, sha256 of ``index.json``, fingerprint, samples, tokenizer), ``steps`` (target, resumed
from, first and last step of this attempt), ``final_metrics`` (the last step's record), ``checkpoints``
(root, the ones this attempt committed, the newest), ``artifacts`` (this record, the metrics log),
start/end times (UTC), ``exit`` and ``cost`` (the pool, instance type and purchase option the attempt
ran on, the node-hour price with its source, and at the end GPU hours x the price of one GPU:
``trainer/run/cost.py``).

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
import time
from datetime import UTC, datetime
from typing import Any

from trainer import exitcodes
from trainer.checkpoint.sidewrites import SideWrite, SideWriter
from trainer.run.cost import attempt_cost
from trainer.storage.blobstore import Blobs, open_blobs

FORMAT = "aiplat-run-record-v1"
PREFIX = "run-records"
IMAGE_DIGEST_ENV = "AIPLAT_IMAGE_DIGEST"
SUBMITTED_BY_ENV = "AIPLAT_SUBMITTED_BY"  # the TrainJob's aiplat.io/submitted-by, through the downward API
EVENTS = ("start", "end")  # one object each per attempt: <attempt>.<event>.json


def record_key(attempt: str, event: str) -> str:
    """The object (under ``run-records/``) of ``attempt``'s ``event`` record."""
    return f"{attempt}.{event}.json"


def resources(world_size: int, uses_gpus: bool) -> dict[str, Any]:
    """What the attempt holds, from what the pod knows: torchrun's ``LOCAL_WORLD_SIZE`` (processes per node,
    one per GPU on a GPU node) and the world size give the node count; GPU hours come at the end."""
    per_node = int(os.environ.get("LOCAL_WORLD_SIZE") or world_size)
    return {
        "nodes": max(1, world_size // max(1, per_node)),
        "gpus_per_node": per_node if uses_gpus else 0,
        "wall_s": None,
        "gpu_hours": None,
    }


def gpu_hours(res: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """``res`` with the attempt's wall time and its GPU hours (nodes x GPUs per node x wall time)."""
    hours = res["nodes"] * res["gpus_per_node"] * wall_s / 3600
    return {**res, "wall_s": round(wall_s, 3), "gpu_hours": round(hours, 6)}


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
        self.attempt = attempt
        self.t0 = time.monotonic()
        self.doc: dict[str, Any] = {
            "format": FORMAT,
            "attempt": attempt,
            "status": "running",
            "started_utc": utc_now(),
            "ended_utc": None,
            "exit": None,
            "image_digest": os.environ.get(IMAGE_DIGEST_ENV) or None,
            "submitted_by": _env(SUBMITTED_BY_ENV),
            **fields,
        }
        self.doc.setdefault("logs", log_links())
        self.doc.setdefault("workload", workload_links(self.doc["started_utc"]))
        self.doc.setdefault("artifacts", {})
        self.doc.setdefault("cost", attempt_cost(None))

    def uri(self, event: str) -> str:
        """Where ``event``'s record of this attempt is written."""
        return self.store.url(record_key(self.attempt, event))

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

    def write(self, event: str) -> SideWrite:
        """Queue the create-only write of ``event``'s record, the document as it is now; returns at once (the
        writer logs a failure, an existing record included: a record is never replaced)."""
        self.doc["artifacts"]["run_record"] = self.uri(event)
        data = json.dumps(self.doc, indent=1, default=str).encode()
        key = record_key(self.attempt, event)
        return self.writer.submit(
            f"the run record {self.uri(event)} ({self.doc['status']})",
            lambda: self.store.write(key, data, create_only=True),
        )

    def start(self) -> SideWrite:
        """The record at the start of training."""
        return self.write("start")

    def finish(self, code: int, reason: str, **fields: Any) -> SideWrite:
        """The record at the end: exit code and reason, end time, and ``fields`` (steps, final metrics,
        checkpoints...)."""
        self.doc.update(fields)
        self.doc.update(
            status="finished",
            ended_utc=utc_now(),
            exit={"code": code, "name": exitcodes.name(code), "reason": reason},
        )
        if self.doc.get("resources"):
            self.doc["resources"] = gpu_hours(self.doc["resources"], time.monotonic() - self.t0)
        self.doc["cost"] = attempt_cost((self.doc.get("resources") or {}).get("gpu_hours"))
        return self.write("end")
