"""``aiplat release publish``: the publisher's Job rendered from the train stack's config and outputs (the
stand-in ``pulumi`` answers them) and from the job's run record (on moto S3), checked by the admission
policies the cluster runs, then created through a local stand-in for the Kubernetes API
(tests/support/fake_kube.py), whose Job controller here starts the pod and lets it print what the publisher
prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from infra.cli.main import main
from infra.io.stackfiles import load_stack_config
from infra.storage.config.storage import BucketPurpose
from tests.infra.admission.cel import refusals
from tests.infra.admission.test_publisher_nodes import POLICIES
from tests.infra.cli.test_train_jobs import _cluster
from tests.support.fake_kube import FakeKube
from tests.support.stand_in_pulumi import install
from trainer.tools.moto_server import MotoServer

pytestmark = pytest.mark.slow

STACK, TEAM, JOB = "prod-us-train", "research", "exp-7"
CFG = load_stack_config(STACK)
CHECKPOINTS = CFG.bucket_name(BucketPurpose.checkpoints)
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer@sha256:{'ab' * 32}"
KEY_ARN = "arn:aws:kms:us-east-1:123456789012:key/0b0e2f5c-0000-4000-8000-000000000001"
RECORDS = f"{TEAM}/checkpoints/{JOB}/run-records"
JOBS = f"/apis/batch/v1/namespaces/{CFG.storage.publisher.namespace}/jobs"
PUBLISHED = {"published": "s3://a/release/exp-7/20261206T000000Z-step120", "model_name": JOB,
             "version": "20261206T000000Z-step120"}  # fmt: skip


def record(status: str, code: int, ended: str, last: int) -> dict[str, Any]:
    return {
        "status": status,
        "exit": {"code": code},
        "ended_utc": ended,
        "image_digest": "sha256:" + "cd" * 32,
        "workload": {"trainjob": JOB},
        "steps": {"last": last},
    }


class JobController(FakeKube):
    """The Job controller and the kubelet, as far as the command sees them: a created Job gets its pod
    (labelled with the Job's name, finished) with the publisher's output as its log, and its status."""

    log: list[str] = [json.dumps(PUBLISHED)]
    succeeded = True

    def answer(self, method: str, path: str, query: dict, body: Any) -> tuple[int, Any]:
        status, got = super().answer(method, path, query, body)
        if method == "POST" and path == JOBS and status == 201:
            ns, name = body["metadata"]["namespace"], body["metadata"]["name"]
            pod = f"{name}-x7k2p"
            labels = {"batch.kubernetes.io/job-name": name}
            self.put(f"/api/v1/namespaces/{ns}/pods",
                     {"metadata": {"name": pod, "namespace": ns, "labels": labels},
                      "status": {"phase": "Succeeded" if self.succeeded else "Failed"}})  # fmt: skip
            self.logs[f"{ns}/{pod}/publish"] = self.log
        if method == "GET" and path.startswith(f"{JOBS}/") and status == 200:
            got = {**got, "status": {"succeeded": 1} if self.succeeded else {"failed": 1}}
        return status, got


@pytest.fixture
def world(tmp_path: Path, moto_s3: MotoServer, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobController]:
    s3 = moto_s3.client()
    s3.create_bucket(Bucket=CHECKPOINTS)
    s3.put_bucket_versioning(Bucket=CHECKPOINTS, VersioningConfiguration={"Status": "Enabled"})
    # a finished attempt, and a later one that failed: the finished one is the provenance
    for name, doc in (
        ("a1.end.json", record("finished", 0, "2026-12-05T10:00:00Z", 120)),
        ("a2.end.json", record("finished", 1, "2026-12-05T12:00:00Z", 150)),
    ):
        s3.put_object(Bucket=CHECKPOINTS, Key=f"{RECORDS}/{name}", Body=json.dumps(doc).encode())
    for key, value in install(tmp_path / "bin", tmp_path / "log", tmp_path / "state").items():
        monkeypatch.setenv(key, value)
    outputs = {"images": {"trainer": IMAGE}, "releaseSigningKeyArn": KEY_ARN, "clusterName": "c"}
    (tmp_path / "state" / "stacks.json").write_text(json.dumps({STACK: {"outputs": outputs}}))
    kube = JobController().start()
    _cluster(moto_s3, kube.url)
    yield kube
    kube.stop()


def publish(*extra: str) -> int:
    return main(["release", "publish", "-s", STACK, "--team", TEAM, "--job", JOB, *extra])


def test_the_dry_run_prints_the_job_the_admission_policies_let_run(world: JobController, capsys) -> None:
    assert publish("--dry-run") == 0
    out, err = capsys.readouterr()
    job = yaml.safe_load(out)
    assert world.requests == []  # nothing reached the cluster
    ns = CFG.storage.publisher.namespace
    assert (job["kind"], job["metadata"]["namespace"]) == ("Job", ns)
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == CFG.storage.publisher.service_account
    (container,) = pod_spec["containers"]
    assert container["image"] == IMAGE
    args = container["args"]
    flags = dict(zip(args[3::2], args[4::2], strict=True))
    assert args[:3] == ["python", "-m", "trainer.release.publish"]
    assert flags == {
        "--from": f"s3://{CHECKPOINTS}/{TEAM}/outputs/{JOB}/model/",
        "--team": TEAM,
        "--run-record": f"s3://{CHECKPOINTS}/{RECORDS}/a1.end.json",  # the finished attempt's
        "--step": "120",
        "--release-root": f"s3://{CFG.bucket_name(BucketPurpose.artifacts)}",
        "--model-name": JOB,
        "--signing-key": KEY_ARN,
    }
    # the policies the stack deploys, on the pod the Job controller would create
    meta = job["spec"]["template"]["metadata"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}
    for name in ("aiplat-workload-images", "aiplat-publisher-identity", "aiplat-publisher-nodes"):
        assert refusals(POLICIES[name], object=pod, request={"namespace": ns, "operation": "CREATE"}) == []
    # and the publisher's own parser takes the command line
    from trainer.release import publish as publisher

    seen: dict[str, Any] = {}

    def fake(*a: Any, **k: Any) -> None:
        seen.update(args=a, kwargs=k)
        raise OSError("stop here")

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(publisher, "publish", fake)
        mp.setattr(publisher, "signer_for", lambda key: key)
        assert publisher.main(args[3:]) == 2
    assert seen["args"][0] == flags["--from"] and seen["kwargs"]["run_record"] == flags["--run-record"]


def test_publish_creates_the_job_and_waits_for_the_version(world: JobController, capsys) -> None:
    assert publish("--model-name", "exp7-chat", "--wait") == 0
    out, _ = capsys.readouterr()
    [sent] = world.sent("POST")
    assert sent.path == JOBS
    args = sent.body["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--model-name" in args
    assert args[args.index("--model-name") + 1] == "exp7-chat"  # the flag's value, not the job's name
    assert sent.auth.startswith("Bearer k8s-aws-v1.")
    text = " ".join(out.split())
    assert f"published {JOB} {PUBLISHED['version']}" in text
    assert f"aiplat release promote {JOB} {PUBLISHED['version']}" in text


def test_a_failed_publisher_or_a_team_without_releases_is_reported(world: JobController, capsys) -> None:
    world.succeeded, world.log = False, ["error: --from=...: model.safetensors holds a pickle"]
    assert publish("--wait") == 1
    assert "holds a pickle" in " ".join(capsys.readouterr().err.split())
    assert main(["release", "publish", "-s", STACK, "--team", "production", "--job", JOB, "--dry-run"]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert "teams.production.releases: false" in err and "set teams.production.releases: true" in err
    assert publish("--dry-run", "--job", "exp-8") != 0  # no run record of that job
    assert "no run record of TrainJob 'exp-8'" in " ".join(capsys.readouterr().err.split())
