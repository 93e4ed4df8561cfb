"""``aiplat train submit / list / logs / cancel`` against a local stand-in for the Kubernetes API
(tests/support/fake_kube.py) and a moto server for STS, EKS, S3 and CloudWatch Logs: the objects the
``kubernetes`` client sends, what the commands print, and one exit code per user error."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import socket
import time
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli import common
from infra.cli.main import main
from infra.core.lognames import container_log_group, container_log_stream
from infra.io.kube_validate import validate_manifest
from infra.io.snapshot import instance_facts
from infra.io.stackfiles import load_stack_config
from infra.io.trainer_configs import training_settings
from infra.jobs import documents as jobs
from infra.pools.config import CapacityType
from infra.training.documents import runtime as t
from infra.training.documents import stack as training_stack
from tests.conftest import REPO
from tests.k8s.crds.kueue_workload import Workload
from tests.support.fake_kube import NOW, FakeKube
from trainer.tools.moto_server import MotoServer

STACK = "prod-us-train"
CFG = load_stack_config(STACK)
CONFIG = "trainer/configs/gpt2_124m.toml"
DIGEST = "sha256:" + "ab" * 32
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"


def trainjobs(ns: str) -> str:
    return f"{TRAINER}/namespaces/{ns}/trainjobs"


def workloads(ns: str) -> str:
    return f"/apis/kueue.x-k8s.io/v1beta2/namespaces/{ns}/workloads"


def pods(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/pods"


def _settings() -> Any:
    settings = training_settings(CFG)
    assert settings is not None
    return settings["runtime"]


@pytest.fixture
def kube() -> Iterator[FakeKube]:
    fake = FakeKube().start()
    # the stack's own runtime, as the program builds it, with its image pinned by digest
    assert CFG.training is not None
    facts = instance_facts(CFG.node_pools[CFG.training.runtime.pool].instance_type, CFG.region)
    assert facts is not None
    spec = training_stack.runtime_spec(CFG, facts, _settings(), f"1234.dkr.ecr/trainer@{DIGEST}")
    fake.put(f"{TRAINER}/clustertrainingruntimes", t.runtime_document(spec))
    yield fake
    fake.stop()


def _cluster(aws: MotoServer, endpoint: str) -> None:
    """The stack's EKS cluster in the emulator, its API endpoint at ``endpoint``."""
    eks = aws.client("eks", CFG.region)
    eks.create_cluster(
        name=CFG.names.cluster,
        roleArn="arn:aws:iam::123456789012:role/cluster",
        resourcesVpcConfig={"subnetIds": ["subnet-1"], "endpointPrivateAccess": True},
    )
    # moto has no API to choose a cluster's endpoint
    from moto.eks.models import eks_backends

    emulated = eks_backends["123456789012"][CFG.region].clusters[CFG.names.cluster]
    emulated.endpoint = endpoint
    emulated.certificate_authority = {"data": ""}


@pytest.fixture
def cluster(moto_s3: MotoServer, kube: FakeKube) -> FakeKube:
    _cluster(moto_s3, kube.url)
    return kube


def submit(*extra: str) -> list[str]:
    return ["train", "submit", "-s", STACK, "--config", CONFIG, *extra]


# -- submit ---------------------------------------------------------------------------------------------


def test_submit_creates_the_rendered_trainjob_in_the_team_queue(cluster: FakeKube, capsys) -> None:
    code = main(submit("--team", "research", "--nodes", "2", "--name", "exp-1"))
    out, err = capsys.readouterr()
    assert code == 0, err
    [sent] = cluster.sent("POST")
    assert sent.path == trainjobs("team-research")
    doc = sent.body
    # the same run render prints, in the team's queue and namespace
    assert (
        main(
            ["train", "render", "-s", STACK, "--config", CONFIG, "--nodes", "2", "--name", "exp-1"]
            + ["--team", "research"]
        )
        == 0
    )
    rendered = yaml.safe_load(capsys.readouterr().out)
    assert doc["spec"]["trainer"] == rendered["spec"]["trainer"]
    assert doc["spec"]["runtimeRef"] == rendered["spec"]["runtimeRef"]
    meta = doc["metadata"]
    assert meta["namespace"] == "team-research"
    assert meta["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert meta["labels"]["kueue.x-k8s.io/priority-class"] == "research"  # the team's default_priority
    assert doc["spec"]["suspend"] is True  # Kueue unsuspends it when it admits it
    # who, which config, which image
    assert meta["annotations"][jobs.SUBMITTED_BY].startswith("arn:aws:")
    assert meta["annotations"][jobs.SUBMITTED_BY].endswith(":user/moto")
    assert meta["annotations"][jobs.CONFIG_SHA256] == hashlib.sha256((REPO / CONFIG).read_bytes()).hexdigest()
    assert meta["annotations"][jobs.IMAGE_DIGEST] == DIGEST
    # the pods carry the queue, submitter and submission time for the run record (downward API)
    [patch] = [p for p in doc["spec"]["runtimePatches"] if p["manager"] == jobs.SUBMIT_PATCH_MANAGER]
    pod_meta = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"][
        "template"
    ]["metadata"]
    assert pod_meta["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert pod_meta["annotations"][jobs.SUBMITTED_AT] == meta["annotations"][jobs.SUBMITTED_AT]
    assert pod_meta["annotations"][jobs.SUBMITTED_BY] == meta["annotations"][jobs.SUBMITTED_BY]
    assert validate_manifest(doc, CFG.cluster.kubernetes_version) == []
    assert "submitted team-research/exp-1 to queue research" in out


def test_submit_authenticates_with_an_eks_token_for_the_cluster(cluster: FakeKube) -> None:
    assert main(submit("--team", "production", "--nodes", "1", "--priority", "dev")) == 0
    auth = cluster.sent("POST")[0].auth
    url = base64.urlsafe_b64decode(auth.removeprefix("Bearer k8s-aws-v1.") + "==").decode()
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert query["Action"] == ["GetCallerIdentity"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")
    assert cluster.sent("POST")[0].body["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] == "dev"


def test_submit_refuses_a_name_already_taken(cluster: FakeKube, capsys) -> None:
    assert main(submit("--team", "research", "--nodes", "1", "--name", "exp-1")) == 0
    capsys.readouterr()
    code = main(submit("--team", "research", "--nodes", "1", "--name", "exp-1"))
    _, err = capsys.readouterr()
    assert code == common.EXIT_NAME_TAKEN
    assert "TrainJob 'exp-1' already exists in namespace team-research; fix: choose another --name" in err


def test_submit_refuses_an_unknown_team_before_any_call(cluster: FakeKube, capsys) -> None:
    code = main(submit("--team", "vision", "--nodes", "1"))
    _, err = capsys.readouterr()
    assert code == common.EXIT_TEAM
    assert "--team: 'vision' is not a team of stack prod-us-train (its teams: production, research)" in err
    assert cluster.requests == []


def test_submit_refuses_a_job_no_flavor_fits(cluster: FakeKube, capsys, stack_doc, tmp_path: Path) -> None:
    doc = stack_doc(STACK)
    doc["config"]["aiplat:platform"]["teams"]["research"]["quotas"]["train"]["borrowing_limit"] = 0
    (tmp_path / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump(doc))
    shutil.copytree(REPO / "stacks" / "policy-pack", tmp_path / "policy-pack")  # the stack's GPU budget
    code = main(submit("--team", "research", "--nodes", "2", "--stacks-dir", str(tmp_path)))
    _, err = capsys.readouterr()
    assert code == common.EXIT_NO_FLAVOR
    assert "2 nodes x 8 GPUs = 16 GPUs, but team 'research' can get at most 8 on pool 'train'" in err
    assert "fix: use --nodes 1 or fewer, or ask your platform team to raise teams.research.quotas.train" in (
        err
    )
    assert cluster.requests == []


def test_submit_without_cluster_access_says_how_to_reach_a_private_endpoint(moto_s3, capsys) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    _cluster(moto_s3, closed)
    code = main(submit("--team", "research", "--nodes", "1"))
    _, err = capsys.readouterr()
    assert code == common.EXIT_CLUSTER
    assert "did not answer" in err and "connect the VPN, or run from the bastion" in err
    assert "--api-endpoint https://127.0.0.1:8443" in err


def test_submit_refused_by_the_api_server_names_the_access_entry(cluster: FakeKube, capsys) -> None:
    cluster.refuse = 403
    code = main(submit("--team", "research", "--nodes", "1"))
    _, err = capsys.readouterr()
    assert code == common.EXIT_CLUSTER
    assert "refused your credentials (HTTP 403" in err and "EKS access entry" in err


def test_submit_without_aws_credentials(cluster: FakeKube, capsys, monkeypatch, tmp_path: Path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    code = main(submit("--team", "research", "--nodes", "1"))
    _, err = capsys.readouterr()
    assert code == common.EXIT_AWS
    assert "AWS credentials: none found" in err and "aws sso login" in err
    assert cluster.requests == []


# -- list -----------------------------------------------------------------------------------------------


def _trainjob(name: str, ns: str, nodes: int, created: str, ckpt: str) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{name}",
            "creationTimestamp": created,
            "labels": {"kueue.x-k8s.io/queue-name": "research", "kueue.x-k8s.io/priority-class": "research"},
            "annotations": {jobs.SUBMITTED_BY: "arn:aws:sts::123456789012:assumed-role/dev/alice"},
        },
        "spec": {
            "runtimeRef": {"name": "aiplat-torch"},
            "trainer": {"numNodes": nodes, "args": ["--set", f"checkpoint.uri={ckpt}"]},
        },
    }


def _workload(tj: dict[str, Any], conditions: list[dict[str, str]]) -> dict[str, Any]:
    """What Kueue v0.19.2 keeps for ``tj`` (validated against the CRD model before use)."""
    wl = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": f"trainjob-{tj['metadata']['name']}-3f2a1",
            "namespace": tj["metadata"]["namespace"],
            "ownerReferences": [
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "name": tj["metadata"]["name"],
                    "uid": tj["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "podSets": [
                {"name": "node", "count": tj["spec"]["trainer"]["numNodes"], "template": {"spec": {}}}
            ],
            "queueName": "research",
            "priorityClassRef": {
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "research",
            },
            "priority": 500,
        },
        "status": {"conditions": conditions},
    }
    Workload.model_validate(wl)
    return wl


def _manifest(step: int) -> bytes:
    """A committed checkpoint's manifest (trainer/checkpoint/manifest.py format v2)."""
    return json.dumps(
        {
            "format": "trainer-ckpt-v2",
            "step": step,
            "attempt": "attempt-20261202T010000Z-abcdef",
            "world_size": 16,
            "files": {".metadata": {"size": 10, "sha256": "0" * 64}},
            "config": {"model": {}},
        }
    ).encode()


def test_list_shows_queue_state_position_last_checkpoint_and_cost(
    cluster: FakeKube, moto_s3, capsys, monkeypatch
) -> None:
    from tests.infra.cli.test_cost_team import runtime_price, table_price, write_attempt

    ns = "team-research"
    s3 = moto_s3.client("s3", CFG.region)
    s3.create_bucket(Bucket="ckpt")
    s3.put_object(Bucket="ckpt", Key="runs/a/step_000000200/manifest.json", Body=_manifest(200))
    # job a's attempts, as the trainer records them: one ended, one still running (no end record yet)
    price = runtime_price(CapacityType.on_demand)
    write_attempt(monkeypatch, "s3://ckpt/runs/a", "0-uid1", price, 0.5)
    write_attempt(monkeypatch, "s3://ckpt/runs/a", "1-uid2", price, 0, end=False)
    ended = json.loads(s3.get_object(Bucket="ckpt", Key="runs/a/run-records/0-uid1.end.json")["Body"].read())
    s3.put_object(Bucket="ckpt", Key="runs/a/step_000000300/attempt-x/.metadata", Body=b"x")  # not committed
    running = _trainjob("a", ns, 2, "2026-12-02T01:00:00Z", "s3://ckpt/runs/a")
    waiting = _trainjob("b", ns, 4, "2026-12-02T01:50:00Z", "s3://ckpt/runs/b")
    cluster.put(trainjobs(ns), running)
    cluster.put(trainjobs(ns), waiting)
    admitted_at = "2026-12-02T01:05:00Z"
    cluster.put(
        workloads(ns),
        _workload(
            running,
            [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "Quota reserved in ClusterQueue team-research",
                    "lastTransitionTime": admitted_at,
                },
                {
                    "type": "Admitted",
                    "status": "True",
                    "reason": "Admitted",
                    "message": "The workload is admitted",
                    "lastTransitionTime": admitted_at,
                },
                {
                    "type": "PodsReady",
                    "status": "True",
                    "reason": "PodsReady",
                    "message": "All pods reached readiness and the workload is running",
                    "lastTransitionTime": "2026-12-02T01:07:00Z",
                },
            ],
        ),
    )
    why = "couldn't assign flavors to pod set node: insufficient unused quota for nvidia.com/gpu in flavor "
    why += "train"
    wl_b = _workload(
        waiting,
        [
            {
                "type": "QuotaReserved",
                "status": "False",
                "reason": "Pending",
                "message": why,
                "lastTransitionTime": "2026-12-02T01:50:01Z",
            }
        ],
    )
    cluster.put(workloads(ns), wl_b)
    cluster.pending[f"{ns}/research"] = {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "metadata": {"name": wl_b["metadata"]["name"], "namespace": ns},
                "priority": 500,
                "localQueueName": "research",
                "positionInClusterQueue": 1,
                "positionInLocalQueue": 0,
            }
        ],
    }
    code = main(["train", "list", "-s", STACK, "--team", "research", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["a"]["state"] == "running" and rows["a"]["position"] is None
    assert rows["a"]["admitted_utc"] == admitted_at and rows["a"]["waited_s"] == 300
    assert rows["a"]["last_checkpoint_step"] == 200  # step 300 has no manifest: not committed
    assert rows["a"]["submitted_by"].endswith("assumed-role/dev/alice")
    assert rows["b"]["state"] == "waiting" and rows["b"]["reason"] == f"Pending: {why}"
    assert rows["b"]["position"] == 0 and rows["b"]["cluster_queue_position"] == 1
    assert rows["b"]["nodes"] == 4 and rows["b"]["last_checkpoint_step"] is None
    assert "checkpoints at s3://ckpt/runs/b" not in err  # no bucket content is not an error
    # each attempt's cost: GPU hours x the price table's price; the running one has none yet
    assert rows["a"]["cost_usd"] == pytest.approx(table_price(ended), abs=1e-5)
    done, running = rows["a"]["attempts"]
    assert (done["attempt"], done["usd"], running["attempt"], running["usd"]) == (
        "0-uid1",
        ended["cost"]["usd"],
        "1-uid2",
        None,
    )
    assert rows["b"]["cost_usd"] is None and rows["b"]["attempts"] == []
    # the table too
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["train", "list", "-s", STACK, "--team", "research"]) == 0
    table = capsys.readouterr().out
    assert "insufficient unused quota" in table and "running" in table
    assert f"{rows['a']['cost_usd']:,.2f}+?" in table  # '+?': an attempt without a cost


def test_list_of_every_team_reads_each_namespace(cluster: FakeKube, capsys) -> None:
    assert main(["train", "list", "-s", STACK, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    listed = {r.path for r in cluster.sent("GET", "/trainjobs")}
    assert listed == {trainjobs("team-production"), trainjobs("team-research")}


def test_list_without_the_visibility_api_has_no_positions(cluster: FakeKube, capsys) -> None:
    ns = "team-research"
    waiting = _trainjob("b", ns, 1, NOW, "")
    cluster.put(trainjobs(ns), waiting)
    cluster.put(workloads(ns), _workload(waiting, []))
    assert main(["train", "list", "-s", STACK, "--team", "research", "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)
    assert row["state"] == "waiting" and row["position"] is None
    assert cluster.sent("GET", "/pendingworkloads")  # asked, answered 404 (not served)


def test_list_refuses_an_unknown_team(cluster: FakeKube, capsys) -> None:
    assert main(["train", "list", "-s", STACK, "--team", "nope"]) == common.EXIT_TEAM
    assert "'nope' is not a team of stack prod-us-train" in capsys.readouterr().err


# -- logs -----------------------------------------------------------------------------------------------


def _pod(name: str, job: str, rank: int, phase: str = "Running", grace: int = 110) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "team-research",
            "creationTimestamp": NOW,
            "labels": {
                "jobset.sigs.k8s.io/jobset-name": job,
                "batch.kubernetes.io/job-completion-index": str(rank),
            },
        },
        "spec": {"terminationGracePeriodSeconds": grace, "containers": [{"name": "node", "image": "x"}]},
        "status": {"phase": phase},
    }


def test_logs_of_a_running_rank_come_from_its_pod(cluster: FakeKube, capsys) -> None:
    ns = "team-research"
    cluster.put(trainjobs(ns), _trainjob("exp", ns, 2, NOW, "s3://ckpt/runs/exp"))
    cluster.put(pods(ns), _pod("exp-node-0-0-abcde", "exp", 0))
    cluster.put(pods(ns), _pod("exp-node-0-1-fghij", "exp", 1))
    cluster.logs[f"{ns}/exp-node-0-1-fghij/node"] = ["rank 1 step 10", "rank 1 step 20"]
    code = main(["train", "logs", "exp", "-s", STACK, "--rank", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == ["rank 1 step 10", "rank 1 step 20"]
    [query] = [r.query for r in cluster.sent("GET", "/pods") if r.path == pods(ns)]
    assert query["labelSelector"] == [
        "jobset.sigs.k8s.io/jobset-name=exp,batch.kubernetes.io/job-completion-index=1"
    ]


def test_logs_after_the_pods_are_gone_come_from_cloudwatch(cluster: FakeKube, moto_s3, capsys) -> None:
    logs = moto_s3.client("logs", CFG.region)
    group = container_log_group(CFG.names.cluster, "team-research")
    logs.create_log_group(logGroupName=group)
    start = int(time.time() * 1000)  # CloudWatch refuses events older than 14 days
    # rank 1 ran twice: its first pod's name sorts after its second's
    streams = (
        ("exp-node-0-0-abcde", 0, ["r0 a"]),
        ("exp-node-0-1-zzzzz", 0, ["r1 first pod"]),
        ("exp-node-0-1-fghij", 1000, ["r1 a", "r1 b"]),
    )
    for pod, offset, lines in streams:
        stream = container_log_stream(pod, "node")
        logs.create_log_stream(logGroupName=group, logStreamName=stream)
        logs.put_log_events(
            logGroupName=group,
            logStreamName=stream,
            logEvents=[{"timestamp": start + offset + i, "message": m} for i, m in enumerate(lines)],
        )
    code = main(["train", "logs", "exp", "-s", STACK, "--team", "research", "--rank", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.splitlines() == ["r1 first pod", "r1 a", "r1 b"]  # oldest pod first
    assert "exp-node-0-1-fghij.node (CloudWatch Logs)" in err


def test_logs_follow_a_running_pod(cluster: FakeKube, capsys) -> None:
    ns = "team-research"
    cluster.put(trainjobs(ns), _trainjob("exp", ns, 1, NOW, "s3://ckpt/runs/exp"))
    cluster.put(pods(ns), _pod("exp-node-0-0-abcde", "exp", 0))
    cluster.logs[f"{ns}/exp-node-0-0-abcde/node"] = ["step 1"]
    assert main(["train", "logs", "exp", "-s", STACK, "--follow"]) == 0
    assert capsys.readouterr().out.splitlines() == ["step 1"]
    [read] = cluster.sent("GET", "/log")
    # the API server parses booleans with Go's strconv.ParseBool ("True" and "true" alike)
    assert read.query["follow"][0] in ("true", "True") and read.query["container"] == ["node"]


def test_logs_of_a_job_still_in_the_queue(cluster: FakeKube, moto_s3, capsys) -> None:
    ns = "team-research"
    cluster.put(trainjobs(ns), _trainjob("exp", ns, 1, NOW, "s3://ckpt/runs/exp"))
    cluster.put(pods(ns), _pod("exp-node-0-0-abcde", "exp", 0, phase="Pending"))
    code = main(["train", "logs", "exp", "-s", STACK])
    _, err = capsys.readouterr()
    assert code == common.EXIT_NO_JOB
    assert "TrainJob team-research/exp has no running pod of rank 0 and no stored log yet" in err


def test_logs_of_a_job_with_neither_pods_nor_stored_logs(cluster: FakeKube, moto_s3, capsys) -> None:
    code = main(["train", "logs", "ghost", "-s", STACK])
    _, err = capsys.readouterr()
    assert code == common.EXIT_NO_JOB
    assert "no pod and no stored log of rank 0 of 'ghost' in team-production, team-research" in err


# -- cancel ---------------------------------------------------------------------------------------------


def test_cancel_deletes_in_the_foreground_with_the_pods_own_grace_period(cluster: FakeKube, capsys) -> None:
    ns = "team-research"
    cluster.put(trainjobs(ns), _trainjob("exp", ns, 2, NOW, "s3://ckpt/runs/exp"))
    cluster.put(pods(ns), _pod("exp-node-0-0-abcde", "exp", 0, grace=110))
    cluster.put(pods(ns), _pod("exp-node-0-1-fghij", "exp", 1, grace=110))
    code = main(["train", "cancel", "exp", "-s", STACK])
    out, err = capsys.readouterr()
    assert code == 0, err
    [delete] = cluster.sent("DELETE")
    assert delete.path == f"{trainjobs(ns)}/exp"
    assert delete.body["propagationPolicy"] == "Foreground"
    # no override: every pod keeps its terminationGracePeriodSeconds (the trainer's shutdown window)
    assert "gracePeriodSeconds" not in delete.body and "gracePeriodSeconds" not in delete.query
    assert "2 pods get SIGTERM and up to 110 s" in out and "team-research/exp is gone" in out


def test_cancel_of_a_job_still_in_the_queue(cluster: FakeKube, capsys) -> None:
    ns = "team-research"
    cluster.put(trainjobs(ns), _trainjob("exp", ns, 2, NOW, "s3://ckpt/runs/exp"))
    assert main(["train", "cancel", "exp", "-s", STACK, "--no-wait"]) == 0
    assert "it has no pods (not admitted yet, or done): it leaves the queue" in capsys.readouterr().out
    assert [r.path for r in cluster.sent("DELETE")] == [f"{trainjobs(ns)}/exp"]


def test_cancel_of_an_unknown_job(cluster: FakeKube, capsys) -> None:
    code = main(["train", "cancel", "nope", "-s", STACK, "--team", "research"])
    _, err = capsys.readouterr()
    assert code == common.EXIT_NO_JOB
    assert "no TrainJob 'nope' in team-research" in err
    assert cluster.sent("DELETE") == []


def test_the_runtime_grace_period_covers_the_trainer_shutdown_window() -> None:
    # what cancel relies on: the pods the runtime makes get at least the trainer's shutdown window
    assert CFG.training is not None
    facts = instance_facts(CFG.node_pools[CFG.training.runtime.pool].instance_type, CFG.region)
    assert facts is not None
    settings = _settings()
    spec = training_stack.runtime_spec(CFG, facts, settings, "img@" + DIGEST)
    pod = t.runtime_document(spec)["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert pod["template"]["spec"]["terminationGracePeriodSeconds"] >= settings.shutdown_window_s


# -- help -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["submit", "list", "logs", "cancel"])
def test_help(command: str, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["train", command, "--help"])
    assert exc.value.code == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the description
    assert f"aiplat train {command}" in out and "7 no cluster access" in out


# -- submit -f: a job file ----------------------------------------------------------------------------------


def _pushed(aws: MotoServer, repository: str) -> str:
    """An image pushed to ``repository`` in the emulated ECR; its digest (ECR's, of the manifest)."""
    ecr = aws.client("ecr", CFG.region)
    ecr.create_repository(repositoryName=repository)
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {
            "mediaType": "application/vnd.docker.container.image.v1+json",
            "size": 2,
            "digest": DIGEST,
        },
        "layers": [],
    }
    put = ecr.put_image(repositoryName=repository, imageManifest=json.dumps(manifest), imageTag="v1")
    return put["image"]["imageId"]["imageDigest"]


def _job_file(tmp_path: Path, image: str) -> Path:
    raw = yaml.safe_load((REPO / "examples/byo-llama/job.yaml").read_text())
    raw["image"] = image
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_submit_a_job_file_with_the_teams_pushed_image(
    moto_s3: MotoServer, cluster: FakeKube, capsys, tmp_path: Path
) -> None:
    repository = "aiplat-prod/teams/research/byo-llama"
    digest = _pushed(moto_s3, repository)
    image = f"123456789012.dkr.ecr.{CFG.region}.amazonaws.com/{repository}@{digest}"
    path = _job_file(tmp_path, image)
    code = main(["train", "submit", "-s", STACK, "-f", str(path)])
    out, err = capsys.readouterr()
    assert code == 0, err
    [sent] = cluster.sent("POST")
    assert sent.path == trainjobs("team-research")
    doc = sent.body
    # what render prints, queued and annotated
    assert main(["train", "render", "-s", STACK, "-f", str(path)]) == 0
    rendered = yaml.safe_load(capsys.readouterr().out)
    assert doc["spec"]["trainer"] == rendered["spec"]["trainer"]
    assert doc["spec"]["trainer"]["image"] == image
    meta = doc["metadata"]
    assert meta["annotations"][jobs.IMAGE_DIGEST] == digest  # the job's image, not the runtime's
    assert meta["annotations"][jobs.CONFIG_SHA256] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert meta["annotations"][jobs.SUBMITTED_BY].endswith(":user/moto")
    assert meta["labels"]["aiplat.io/team"] == "research" and doc["spec"]["suspend"] is True
    managers = [p["manager"] for p in doc["spec"]["runtimePatches"]]
    assert managers == [jobs.JOB_PATCH_MANAGER, jobs.SUBMIT_PATCH_MANAGER]
    assert validate_manifest(doc, CFG.cluster.kubernetes_version) == []
    assert "submitted team-research/byo-llama-ft to queue research" in out and digest in out


def test_submit_refuses_a_job_file_whose_image_was_never_pushed(
    moto_s3: MotoServer, cluster: FakeKube, capsys, tmp_path: Path
) -> None:
    repository = "aiplat-prod/teams/research/byo-llama"
    _pushed(moto_s3, repository)
    missing = "sha256:" + "ee" * 32
    path = _job_file(tmp_path, f"123456789012.dkr.ecr.{CFG.region}.amazonaws.com/{repository}@{missing}")
    code = main(["train", "submit", "-s", STACK, "-f", str(path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert f"job.yaml: image: {repository} has no image {missing} (ecr:DescribeImages)" in err
    assert cluster.requests == []  # refused before the cluster is called


def test_submit_refuses_a_job_files_image_of_another_account(
    moto_s3: MotoServer, cluster: FakeKube, capsys, tmp_path: Path
) -> None:
    path = _job_file(
        tmp_path,
        f"210987654321.dkr.ecr.{CFG.region}.amazonaws.com/aiplat-prod/teams/research/byo-llama@{DIGEST}",
    )
    code = main(["train", "submit", "-s", STACK, "-f", str(path)])
    _, err = capsys.readouterr()
    assert code == 2
    assert "is in account 210987654321, but the stack's registry is account 123456789012's" in err
    assert cluster.requests == []
