"""The Kubeflow SDK (PyPI ``kubeflow``, pinned in the dev extra) against the platform, as a notebook uses it
(docs/how-to/kubeflow-sdk.md): connected with an EKS token (``infra.io.kube_jobs.connect``, moto for EKS
and STS), a ``CustomTrainerContainer`` with the team's image and settings on the stack's runtime, sent to
a local stand-in for the API server (tests/support/fake_kube.py) that serves the plan's
ClusterTrainingRuntime. What the SDK sent is checked against the Trainer CRD model and the Kubernetes
schema, the plan's admission policies (the TrainJob and the pod the Trainer would build from it) and the
plan's Kueue objects (queue, priority class, flavor, quota)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubeflow.trainer import CustomTrainerContainer, KubernetesBackendConfig, TrainerClient
from kubeflow.trainer.options.common import Name
from kubeflow.trainer.options.kubernetes import Labels

from infra.cli.train_build import kubeflow_options, team_job
from infra.core.errors import ConfigErrors
from infra.io.kube_jobs import connect
from infra.io.kube_validate import validate_manifest
from infra.io.stackfiles import load_stack_config
from infra.plan.runner import Plan
from tests.infra.cli.test_train_jobs import _cluster
from tests.support.fake_kube import FakeKube
from tests.support.trainjobs import admission_refusals, effective_pod, kueue_problems, plan_runtime
from trainer.tools.moto_server import MotoServer

STACK = "prod-us-train"
CFG = load_stack_config(STACK)
TRAINER = "/apis/trainer.kubeflow.org/v1alpha1"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
IMAGE = f"{REGISTRY}/aiplat-prod/teams/research/byo-llama@sha256:" + "7c" * 32
POD_POLICIES = ("aiplat-workload-images", "aiplat-publisher-identity", "aiplat-team-pods")


@pytest.fixture(scope="module")
def plan(plan_stack) -> Plan:
    return plan_stack(STACK)


@pytest.fixture
def api(plan: Plan, moto_s3: MotoServer) -> Iterator[tuple[FakeKube, Any]]:
    """The API server stand-in serving the plan's runtime, and a client configuration as a notebook gets
    it: an EKS token from the caller's AWS credentials, the endpoint and CA from eks:DescribeCluster."""
    fake = FakeKube().start()
    fake.put(f"{TRAINER}/clustertrainingruntimes", plan_runtime(plan))
    _cluster(moto_s3, fake.url)
    cluster = connect(moto_s3.client("eks", CFG.region), moto_s3.client("sts", CFG.region), CFG.names.cluster)
    yield fake, cluster.api.configuration
    fake.stop()


def submit(
    configuration: Any, image: str, name: str = "llama-nb-1", sent_image: str | None = None
) -> dict[str, Any]:
    """A notebook's submission as docs/how-to/kubeflow-sdk.md makes it: the team's job checked and set up
    by ``team_job``, then the SDK's own objects (``sent_image``: what a notebook that ignored the helper's
    image would send)."""
    job = team_job(
        STACK,
        team="research",
        name=name,
        image=image,
        command=["/app/train.py"],
        nodes=2,
        data="byo-llama/corpus",
        timeouts={"max_run_s": 7200},
    )
    client = TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=job.namespace, client_configuration=configuration)
    )
    created = client.train(
        runtime=job.runtime,
        trainer=CustomTrainerContainer(image=sent_image or job.image, num_nodes=job.nodes, env=job.env),
        options=kubeflow_options(job),
    )
    return {"name": created, "namespace": job.namespace, "env": job.env}


def _sent(fake: FakeKube, namespace: str) -> dict[str, Any]:
    [post] = fake.sent("POST")
    assert post.path == f"{TRAINER}/namespaces/{namespace}/trainjobs"
    assert post.auth.startswith("Bearer k8s-aws-v1.")  # the EKS token, not a kubeconfig
    doc = dict(post.body)
    # the API server takes the namespace from the path
    doc["metadata"] = {**doc["metadata"], "namespace": namespace}
    return doc


def test_a_trainjob_built_by_the_kubeflow_sdk_passes_the_platform(api, plan: Plan) -> None:
    fake, configuration = api
    out = submit(configuration, IMAGE)
    doc = _sent(fake, out["namespace"])
    assert out["name"] == doc["metadata"]["name"] == "llama-nb-1"
    # the SDK read the runtime it was given, cluster-scoped (after looking for a namespaced one)
    assert [r.path for r in fake.sent("GET", "trainingruntimes")][
        -1
    ] == f"{TRAINER}/clustertrainingruntimes/aiplat-torch"
    assert doc["spec"]["runtimeRef"] == {"kind": "ClusterTrainingRuntime", "name": "aiplat-torch"}
    # the Trainer CRD model and the Kubernetes schema; then the pod the Trainer makes of it
    assert validate_manifest(doc, CFG.cluster.kubernetes_version) == []
    pod = effective_pod(plan_runtime(plan), doc)
    assert validate_manifest(pod, CFG.cluster.kubernetes_version) == []
    # the plan's admission policies let both through in the team's namespace
    assert admission_refusals(plan, doc, "team-research", "aiplat-trainjobs") == []
    assert admission_refusals(plan, pod, "team-research", *POD_POLICIES) == []
    # Kueue's selection: the team's LocalQueue, a priority class, the pool's flavor, within the quota
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "research"
    assert kueue_problems(plan, doc, pod) == []
    # the env contract reached the pods, with the image's digest for the records
    [node] = [c for c in pod["spec"]["containers"] if c["name"] == "node"]
    env = {e["name"]: e.get("value") for e in node["env"]}
    assert {k: env[k] for k in out["env"]} == out["env"]
    assert env["AIPLAT_IMAGE_DIGEST"] == IMAGE.split("@")[1] and node["image"] == IMAGE
    assert env["AIPLAT_DATA_URI"].endswith("/research/byo-llama/corpus/")
    # the name was given once: the checkpoints go to the job's own folder; the time limit reached Kueue
    assert env["AIPLAT_CHECKPOINT_URI"].endswith("/research/checkpoints/llama-nb-1/")
    assert doc["metadata"]["labels"]["kueue.x-k8s.io/max-exec-time-seconds"] == "7200"


def test_the_sdk_with_another_teams_image_is_refused_at_admission(api, plan: Plan) -> None:
    fake, configuration = api
    theirs = IMAGE.replace("/teams/research/", "/teams/production/")
    submit(configuration, IMAGE, sent_image=theirs)  # sent anyway: the API server's admission refuses it
    doc = _sent(fake, "team-research")
    [refused] = admission_refusals(plan, doc, "team-research", "aiplat-trainjobs")
    assert "an image of a team's repositories" in refused
    # the settings helper refuses it before anything is sent
    with pytest.raises(ConfigErrors, match="is team 'production''s repository"):
        team_job(STACK, team="research", name="x", image=theirs, command=["/app/train.py"])
    # an image by tag is refused as a job file's is, in the same words
    with pytest.raises(ConfigErrors, match="is not an image by digest"):
        team_job(
            STACK, team="research", name="x", image=IMAGE.split("@")[0] + ":v1", command=["/app/train.py"]
        )
    # the SDK cannot set the pods' grace period: a window of its own is refused, not silently dropped
    with pytest.raises(ConfigErrors, match="timeouts.preemption_window_s: 300: the Kubeflow SDK cannot"):
        team_job(
            STACK,
            team="research",
            name="x",
            image=IMAGE,
            command=["/app/train.py"],
            timeouts={"preemption_window_s": 300},
        )


def test_kueue_would_not_admit_more_than_the_team_can_get(api, plan: Plan) -> None:
    fake, configuration = api
    # the helper refuses it before anything is sent, as render -f and submit -f do
    with pytest.raises(
        ConfigErrors, match="4 nodes x 8 GPUs = 32 GPUs, but team 'research' can get at most 16"
    ):
        team_job(STACK, team="research", name="too-big", image=IMAGE, command=["/app/train.py"], nodes=4)
    # a notebook that skips the helper's nodes is still held by Kueue
    job = team_job(STACK, team="research", name="too-big", image=IMAGE, command=["/app/train.py"])
    client = TrainerClient(
        backend_config=KubernetesBackendConfig(namespace=job.namespace, client_configuration=configuration)
    )
    client.train(
        runtime=job.runtime,
        trainer=CustomTrainerContainer(image=IMAGE, num_nodes=4, env=job.env),
        options=[Name(job.name), Labels(job.labels)],
    )
    doc = _sent(fake, job.namespace)
    problems = kueue_problems(plan, doc, effective_pod(plan_runtime(plan), doc))
    # research: 8 GPUs nominal, borrowing at most 8 more: 4 nodes x 8 is more than it can ever get
    assert "4 x nvidia.com/gpu 8 is more than team-research can get (16)" in problems
