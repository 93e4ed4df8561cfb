"""A run record links to its logs and its Kueue workload from what the pod knows (the downward API
variables the training runtime sets: tests/infra/training/documents/test_runtime.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer.checkpoint.sidewrites import SideWriter
from trainer.run.runrecord import RunRecord

POD_ENV = {
    "POD_NAME": "exp-node-0-0-abcde",
    "POD_NAMESPACE": "team-research",
    "AIPLAT_TRAINJOB": "exp",
    "AIPLAT_QUEUE": "research",
    "AIPLAT_PRIORITY_CLASS": "research",
    "AIPLAT_SUBMITTED_AT": "2026-12-02T01:00:00Z",
    "AIPLAT_SUBMITTED_BY": "arn:aws:sts::111122223333:assumed-role/ml-research/alice",
    # as the kubelet expands the runtime's $(POD_NAMESPACE) / $(POD_NAME)
    "AIPLAT_LOG_GROUP": "/aiplat/aiplat-prod-use1/containers/team-research",
    "AIPLAT_LOG_STREAM": "exp-node-0-0-abcde.node",
}


def _written(tmp_path: Path) -> dict:
    writer = SideWriter(timeout_s=30)
    record = RunRecord.open(str(tmp_path), "attempt-1", {"steps": {}}, writer)
    assert record is not None
    record.start()
    assert writer.close() == []
    return json.loads((tmp_path / "run-records" / "attempt-1.start.json").read_text())


def test_record_links_the_log_stream_and_the_workload(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in POD_ENV.items():
        monkeypatch.setenv(k, v)
    doc = _written(tmp_path)
    assert doc["logs"] == {
        "cloudwatch_log_group": POD_ENV["AIPLAT_LOG_GROUP"],
        "cloudwatch_log_stream": POD_ENV["AIPLAT_LOG_STREAM"],
        "pod": "exp-node-0-0-abcde",
        "namespace": "team-research",
    }
    assert doc["submitted_by"] == POD_ENV["AIPLAT_SUBMITTED_BY"]
    wl = doc["workload"]
    assert (wl["trainjob"], wl["queue"], wl["priority_class"]) == ("exp", "research", "research")
    assert wl["submitted_utc"] == "2026-12-02T01:00:00Z"
    # from submission to this attempt's start, as the record's own start time says
    from datetime import datetime

    started = datetime.strptime(doc["started_utc"], "%Y-%m-%dT%H:%M:%SZ")
    assert wl["waited_s"] == int((started - datetime(2026, 12, 2, 1, 0, 0)).total_seconds())


def test_record_off_the_cluster_has_no_links(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for k in POD_ENV:
        monkeypatch.delenv(k, raising=False)
    doc = _written(tmp_path)
    assert doc["logs"] is None and doc["workload"] is None and doc["submitted_by"] is None


def test_a_job_not_submitted_by_the_cli_has_its_queue_but_no_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in POD_ENV.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("AIPLAT_SUBMITTED_AT", "")  # the downward API gives "" for a missing annotation
    doc = _written(tmp_path)
    assert doc["workload"]["queue"] == "research" and doc["workload"]["waited_s"] is None
