# ruff: noqa: F811 (pytest fixtures imported from test_train_jobs are parameters here)
"""``aiplat train why`` against recorded API objects (a local stand-in for the Kubernetes API,
tests/support/fake_kube.py, with Kueue v0.19.2 Workloads validated against the CRD model and pods and nodes
against the Kubernetes schema) and CloudWatch Logs in a moto server: a pending job, a failed one and a
preempted one, each explained from what the cluster holds."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest

from infra.cli.main import main
from infra.core.lognames import container_log_group, container_log_stream
from infra.io.kube_validate import validate_manifest
from infra.pools.config import CapacityType
from tests.infra.cli.test_train_jobs import (  # noqa: F401 (the fixtures kube and cluster)
    CFG,
    STACK,
    _trainjob,
    _workload,
    cluster,
    kube,
    pods,
    trainjobs,
    workloads,
)
from tests.support.fake_kube import FakeKube

NS, OTHER = "team-research", "team-production"
NODE_A, NODE_B = "ip-10-0-1-5.ec2.internal", "ip-10-0-1-6.ec2.internal"


def _admitted(wl: dict[str, Any], gpus: int, since: str) -> dict[str, Any]:
    """``wl`` as Kueue keeps it once admitted on flavor train with ``gpus`` GPUs."""
    wl["status"] = {
        "admission": {
            "clusterQueue": wl["metadata"]["namespace"],
            "podSetAssignments": [
                {
                    "name": "node",
                    "flavors": {"nvidia.com/gpu": "train"},
                    "resourceUsage": {"nvidia.com/gpu": str(gpus)},
                    "count": gpus // 8,
                }
            ],
        },
        "conditions": [
            {"type": t, "status": "True", "reason": t, "message": "", "lastTransitionTime": since}
            for t in ("QuotaReserved", "Admitted", "PodsReady")
        ],
    }
    return wl


def _holder(fake: FakeKube, name: str, gpus: int, uid: str = "wl-uid-p") -> dict[str, Any]:
    tj = _trainjob(name, OTHER, gpus // 8, "2026-12-02T00:00:00Z", f"s3://ckpt/{name}")
    wl = _admitted(_workload(tj, []), gpus, "2026-12-02T00:10:00Z")
    wl["metadata"]["uid"] = uid
    fake.put(workloads(OTHER), wl)
    return wl


def _pod(
    job: str, rank: int, attempt: str, node: str, terminated: dict[str, Any], **status: Any
) -> dict[str, Any]:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{job}-node-0-{rank}-{attempt}",
            "namespace": NS,
            "creationTimestamp": terminated["startedAt"],
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "batch.kubernetes.io/job-completion-index": str(rank),
            },
        },
        "spec": {"nodeName": node, "containers": [{"name": "node", "image": "trainer@sha256:" + "ab" * 32}]},
        "status": {
            "phase": "Failed",
            "startTime": terminated["startedAt"],
            "containerStatuses": [
                {
                    "name": "node",
                    "ready": False,
                    "restartCount": 0,
                    "image": "trainer",
                    "imageID": "",
                    "state": {"terminated": terminated},
                }
            ],
            **status,
        },
    }
    assert validate_manifest(pod, CFG.cluster.kubernetes_version) == []
    return pod


def _log(moto_s3: Any, pod: str, lines: list[str]) -> None:
    logs = moto_s3.client("logs", CFG.region)
    group = container_log_group(CFG.names.cluster, NS)
    with contextlib.suppress(logs.exceptions.ResourceAlreadyExistsException):
        logs.create_log_group(logGroupName=group)
    stream = container_log_stream(pod, "node")
    logs.create_log_stream(logGroupName=group, logStreamName=stream)
    start = int(time.time() * 1000)  # CloudWatch refuses events older than 14 days
    events = [{"timestamp": start + i, "message": line} for i, line in enumerate(lines)]
    logs.put_log_events(logGroupName=group, logStreamName=stream, logEvents=events)


def why(capsys, name: str) -> tuple[str, dict[str, Any]]:
    assert main(["train", "why", name, "-s", STACK, "--team", "research"]) == 0
    text = capsys.readouterr().out
    code = main(["train", "why", name, "-s", STACK, "--team", "research", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return text, json.loads(out)


def test_a_pending_job_says_what_it_waits_for_and_who_holds_it(cluster: FakeKube, capsys) -> None:
    tj = _trainjob("big", NS, 2, "2026-12-02T01:50:00Z", "s3://ckpt/big")
    cluster.put(trainjobs(NS), tj)
    message = (
        "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
        "train, 16 more needed"
    )
    wl = _workload(
        tj,
        [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": message,
                "lastTransitionTime": "2026-12-02T01:50:01Z",
            }
        ],
    )
    cluster.put(workloads(NS), wl)
    _holder(cluster, "prod-run", 16)
    cluster.pending[f"{NS}/research"] = {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": wl["metadata"]["name"], "namespace": NS},
                "priority": 500,
                "localQueueName": "research",
                "positionInClusterQueue": 3,
                "positionInLocalQueue": 2,
            }
        ],
    }
    text, got = why(capsys, "big")
    assert got["state"] == "waiting" and got["position"] == 2
    assert (
        got["summary"]
        == "waiting for quota: 16 more nvidia.com/gpu needed in flavor train (position 2 in its team's queue)"
    )
    assert got["holders"] == [{"job": "prod-run", "namespace": OTHER, "priority": "", "gpus": 16}]
    assert "team-production/prod-run: 16 GPUs" in text
    assert "ask your platform team" in text and got["attempts"] == []


def test_a_failed_job_names_each_attempts_exit_node_fault_cost_and_last_lines(
    cluster: FakeKube, moto_s3, capsys, monkeypatch
) -> None:
    from tests.infra.cli.test_cost_team import runtime_price, table_price, write_attempt

    tj = _trainjob("exp-f", NS, 1, "2026-12-02T01:00:00Z", "s3://ckpt/exp-f")
    # the run records: the crashed attempt wrote no end, the second ended with exit 2 (bad input)
    moto_s3.client("s3", CFG.region).create_bucket(Bucket="ckpt")
    price = runtime_price(CapacityType.on_demand)
    write_attempt(monkeypatch, "s3://ckpt/exp-f", "0-a1", price, 0, end=False)
    write_attempt(monkeypatch, "s3://ckpt/exp-f", "1-b2", price, 0.25, code=2)
    tj["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "JobSetFailed",
                "message": "jobset failed: FailedJobs",
                "lastTransitionTime": "2026-12-02T01:40:00Z",
            }
        ]
    }
    cluster.put(trainjobs(NS), tj)
    cluster.put(workloads(NS), _admitted(_workload(tj, []), 8, "2026-12-02T01:01:00Z"))
    first = _pod(
        "exp-f",
        0,
        "a1",
        NODE_A,
        {
            "exitCode": 1,
            "reason": "Error",
            "startedAt": "2026-12-02T01:02:00Z",
            "finishedAt": "2026-12-02T01:20:00Z",
        },
    )
    second = _pod(
        "exp-f",
        0,
        "b2",
        NODE_B,
        {
            "exitCode": 2,
            "reason": "Error",
            "startedAt": "2026-12-02T01:25:00Z",
            "finishedAt": "2026-12-02T01:39:00Z",
        },
    )
    cluster.put(pods(NS), first)
    cluster.put(pods(NS), second)
    # node A: one GPU withdrawn by the device plugin (an XID), and a kubelet warning in the attempt's window
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE_A},
        "status": {
            "capacity": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"},
            "allocatable": {"nvidia.com/gpu": "7", "vpc.amazonaws.com/efa": "32"},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready",
                }
            ],
        },
    }
    assert validate_manifest(node, CFG.cluster.kubernetes_version) == []
    cluster.put("/api/v1/nodes", node)
    cluster.put(
        "/api/v1/namespaces/default/events",
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{NODE_A}.1", "namespace": "default"},
            "involvedObject": {"kind": "Node", "name": NODE_A},
            "type": "Warning",
            "reason": "SystemOOM",
            "message": "System OOM encountered, victim process: python",
            "lastTimestamp": "2026-12-02T01:19:50Z",
        },
    )
    _log(
        moto_s3,
        first["metadata"]["name"],
        ["step 120 loss 3.1", "RuntimeError: CUDA error: unspecified launch failure"],
    )
    _log(moto_s3, second["metadata"]["name"], ["error: dataset: s3://data/x: no shards; fix: check data"])
    text, got = why(capsys, "exp-f")
    assert got["state"] == "failed" and got["summary"].startswith("failed: JobSetFailed")
    a, b = got["attempts"]
    assert (a["exit_code"], a["exit_class"], b["exit_code"], b["exit_class"]) == (1, "crash", 2, "bad_input")
    assert "restarts from its last checkpoint, at most 3 times" in a["meaning"]
    assert "the job fails at once, no restart" in b["meaning"]
    assert "1 of 8 GPUs withdrawn by the device plugin as unhealthy" in " ".join(a["node_faults"])
    assert any("SystemOOM" in f for f in a["node_faults"])
    assert a["log_tail"][-1] == "RuntimeError: CUDA error: unspecified launch failure"
    assert b["log_tail"] == ["error: dataset: s3://data/x: no shards; fix: check data"]
    assert f"node {NODE_B}: gone (replaced or scaled in since)" in got["skipped"]
    assert "exit 2 (bad_input)" in text and "last log lines:" in text
    # what each attempt cost: the ended one GPU hours x the table's price, the crashed one named as unpriced
    crashed, ended = got["costs"]
    assert crashed["attempt"] == "0-a1" and crashed["usd"] is None and "no end record" in crashed["unknown"]
    record = {"cost": ended, "resources": {"gpu_hours": ended["gpu_hours"]}}
    assert ended["attempt"] == "1-b2" and ended["usd"] == pytest.approx(table_price(record), abs=1e-5)
    assert f"cost of attempt 1-b2 ({ended['ended_utc']}): {ended['gpu_hours']:,.3f} GPU hours x" in text
    assert f"= {ended['usd']:,.2f} USD" in text and "cost of attempt 0-a1 (no end record): not priced" in text


def test_a_preempted_job_names_the_preemptor_and_the_checkpointed_stop(cluster: FakeKube, capsys) -> None:
    tj = _trainjob("exp-p", NS, 1, "2026-12-02T01:00:00Z", "s3://ckpt/exp-p")
    cluster.put(trainjobs(NS), tj)
    holder = _holder(cluster, "prod-run", 16, uid="6a2c0e1f-preemptor")
    message = (
        f"Preempted to accommodate a workload (UID: {holder['metadata']['uid']}, JobUID: uid-prod-run) "
        "due to "
        "reclamation within the cohort; preemptor path: /team-production; preemptee path: /team-research"
    )
    wl = _workload(
        tj,
        [
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": message,
                "lastTransitionTime": "2026-12-02T01:30:00Z",
            },
            {
                "type": "Preempted",
                "status": "True",
                "reason": "InCohortReclamation",
                "message": message,
                "lastTransitionTime": "2026-12-02T01:30:00Z",
            },
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": "couldn't assign flavors to pod set node: insufficient unused quota for "
                "nvidia.com/gpu in flavor train, 8 more needed",
                "lastTransitionTime": "2026-12-02T01:30:01Z",
            },
        ],
    )
    cluster.put(workloads(NS), wl)
    pod = _pod(
        "exp-p",
        0,
        "c3",
        NODE_A,
        {
            "exitCode": 143,
            "reason": "Error",
            "startedAt": "2026-12-02T01:05:00Z",
            "finishedAt": "2026-12-02T01:31:00Z",
        },
        conditions=[
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "EvictionByEvictionAPI",
                "message": "Eviction API: evicting",
            }
        ],
    )
    cluster.put(pods(NS), pod)
    text, got = why(capsys, "exp-p")
    assert got["state"] == "evicted"
    assert any(
        d == "another team reclaimed the quota this team had borrowed (by team-production/prod-run)"
        for d in got["details"]
    )
    assert any(
        d.startswith("evicted (now, 2026-12-02T01:30:00Z): preempted by Kueue") for d in got["details"]
    )
    [a] = got["attempts"]
    assert a["exit_class"] == "preempted" and "no failure is counted" in a["meaning"]
    assert a["disruption"].startswith("evicted (a node drain, Karpenter's disruption or a Spot interruption)")
    assert "stopped by the cluster: evicted" in text


def test_a_pending_job_of_a_queue_held_for_budget_says_so(cluster: FakeKube, capsys) -> None:
    """The team's ClusterQueue as the budget hold leaves it (stopPolicy Hold, its annotation): the waiting
    job's story starts with the hold; a queue an operator stopped by hand is not said to be the budget's."""
    from infra.core.labels import BUDGET_HOLD_ANNOTATION
    from tests.k8s.crds.kueue import ClusterQueueSpec

    tj = _trainjob("late", NS, 1, "2026-12-02T01:50:00Z", "s3://ckpt/late")
    cluster.put(trainjobs(NS), tj)
    reserved = {
        "type": "QuotaReserved",
        "status": "False",
        "reason": "Inadmissible",
        "message": "ClusterQueue team-research is inactive",
        "lastTransitionTime": "2026-12-02T01:50:01Z",
    }
    cluster.put(workloads(NS), _workload(tj, [reserved]))
    queue = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": "team-research", "annotations": {BUDGET_HOLD_ANNOTATION: "2026-12"}},
        "spec": {"cohortName": "gpus", "stopPolicy": "Hold"},
    }
    ClusterQueueSpec.model_validate(queue["spec"])
    cluster.put("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", queue)
    text, got = why(capsys, "late")
    assert got["state"] == "waiting"
    assert got["details"][0].startswith(
        "the team's queue is held: it has spent its monthly budget for 2026-12"
    )
    assert "the month turns or the budget is raised" in text
    queue["metadata"]["annotations"] = {}
    _, got = why(capsys, "late")
    assert not any("budget" in d for d in got["details"])
