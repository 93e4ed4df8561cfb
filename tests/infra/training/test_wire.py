"""What the train stacks' plans declare for training on the cluster, read from the recorded resources."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Any

import pytest
import yaml

from infra.io.build_context import REPO_ROOT, build_hash, image_tag
from infra.io.kube_validate import validate_manifest
from infra.plan.runner import Plan
from infra.training.documents.runtime import OBSOLETE_ENV

PRICES = yaml.safe_load((REPO_ROOT / "infra/cost/data/prices.yaml").read_text())
TRAINER = "kubernetes:trainer.kubeflow.org/v1alpha1"
RUNTIME = f"{TRAINER}:ClusterTrainingRuntime"
TRAINJOB = f"{TRAINER}:TrainJob"
PODMONITOR = "kubernetes:monitoring.coreos.com/v1:PodMonitor"
IMAGE = "docker-build:index:Image"


def _ints(value: Any) -> Any:
    """Numbers as the Kubernetes provider sends them (the engine's protobuf Struct holds floats)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _ints(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_ints(v) for v in value]
    return value


def _objects(plan: Plan, type_: str) -> list[dict[str, Any]]:
    out = []
    for r in plan.resources:
        if r.type == type_:
            api, kind = type_.removeprefix("kubernetes:").rsplit(":", 1)
            out.append(_ints({"apiVersion": api, "kind": kind, **r.inputs}))
    return out


def _pod(runtime: dict[str, Any]) -> dict[str, Any]:
    return runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]


def _shutdown_window(config: str) -> float:
    """Read straight from the trainer config file, not through the code under test."""
    return float(tomllib.loads((REPO_ROOT / config).read_text())["checkpoint"]["shutdown_window_s"])


@pytest.mark.parametrize("stack", ["prod-us-train", "dev-us-train"])
def test_every_training_object_validates(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    version = plan.config["cluster"]["kubernetes_version"]
    docs = [d for t in (RUNTIME, TRAINJOB) for d in _objects(plan, t)]
    # runtime, run, and the bandwidth check where the stack declares it (not dev: its pool keeps 1 node)
    declared = 3 if plan.config["training"]["bandwidth_check"]["enabled"] else 2
    assert len(docs) == declared, [d["kind"] for d in docs]
    problems = [p for d in docs for p in validate_manifest(d, version)]
    assert problems == []


def test_prod_runtime_uses_every_gpu_and_efa_device_of_a_p5(plan_stack) -> None:
    (runtime,) = _objects(plan_stack("prod-us-train"), RUNTIME)
    (node,) = _pod(runtime)["containers"]
    for part in ("requests", "limits"):
        assert node["resources"][part]["nvidia.com/gpu"] == "8"
        assert node["resources"][part]["vpc.amazonaws.com/efa"] == "32"
        assert node["resources"][part]["hugepages-2Mi"] == "5120Mi"
    env = {e["name"]: e.get("value") for e in node["env"]}  # NODE_NAME comes from the downward API
    assert env["NCCL_NET"] == "Libfabric" and env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] == "1"
    assert not set(env) & set(OBSOLETE_ENV)
    # the run record's image digest is the one the pod runs
    _, at, digest = node["image"].partition("@")
    assert at and digest.startswith("sha256:") and env["AIPLAT_IMAGE_DIGEST"] == digest
    # what the pool's nodes cost, for the run records: the price table's On-Demand p5 price
    price = json.loads(env["AIPLAT_PRICE"])
    entry = PRICES["instances"]["us-east-1"]["p5.48xlarge"]["on_demand"]
    assert (price["pool"], price["instance_type"], price["purchase_option"]) == (
        "train",
        "p5.48xlarge",
        "on_demand",
    )
    assert (price["usd_per_node_hour"], price["source"], price["node_gpus"]) == (
        entry["usd"],
        entry["source"],
        8,
    )


def test_dev_runtime_has_no_efa_and_runs_on_the_spot_pool(plan_stack) -> None:
    plan = plan_stack("dev-us-train")
    (runtime,) = _objects(plan, RUNTIME)
    pod = _pod(runtime)
    (node,) = pod["containers"]
    for part in ("requests", "limits"):
        assert "vpc.amazonaws.com/efa" not in node["resources"][part]
        assert "hugepages-2Mi" not in node["resources"][part]
        assert node["resources"][part]["nvidia.com/gpu"] == "1"
    env = {e["name"]: e.get("value") for e in node["env"]}  # NODE_NAME comes from the downward API
    assert env["NCCL_NET"] == "Socket"
    pool = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert pool[0]["matchExpressions"][0]["values"] == ["gpu"]
    assert plan.config["node_pools"]["gpu"]["capacity_type"] == "spot"
    # its pods are priced at the pool's Spot price: the highest zone price of the region in the table
    price = json.loads(env["AIPLAT_PRICE"])
    itype = plan.config["node_pools"]["gpu"]["instance_type"]
    zones = PRICES["instances"][plan.config["region"]][itype]["spot"]["zones"]
    assert (price["instance_type"], price["purchase_option"]) == (itype, "spot")
    assert price["usd_per_node_hour"] == max(zones.values())
    for job in _objects(plan, TRAINJOB):
        assert job["spec"]["trainer"]["numProcPerNode"] == 1


@pytest.mark.parametrize("stack", ["prod-us-train", "dev-us-train"])
def test_grace_period_covers_the_trainers_shutdown_window(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    (runtime,) = _objects(plan, RUNTIME)
    config = plan.config["training"]["runtime"]["trainer_config"]
    assert _pod(runtime)["terminationGracePeriodSeconds"] >= _shutdown_window(config)


def test_workloads_run_the_built_image_by_digest(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    images = {r.name: r for r in plan.resources if r.type == IMAGE}
    # one build per image the stack file builds (trainer, the release fetch tool, vLLM)
    assert set(images) == {f"images-{name}" for name in plan.config["images"]["builds"]}
    image = images["images-trainer"]
    assert image.inputs["push"] is True and image.inputs["buildOnPreview"] is False
    assert image.inputs["registries"] == "[secret]"  # the ECR token never reaches the plan
    (tag,) = image.inputs["tags"]
    repo, _, tag_name = tag.rpartition(":")
    expected = build_hash(
        REPO_ROOT, context=".", dockerfile="images/trainer/Dockerfile", build_args={}, platform="linux/amd64"
    )
    assert tag_name == image_tag(expected)
    (runtime,) = _objects(plan, RUNTIME)
    ref = _pod(runtime)["containers"][0]["image"]
    assert ref.startswith(f"{repo}@sha256:") and len(ref.split("@sha256:")[1]) == 64
    assert plan.outputs["images"]["trainer"] == ref


def test_runs_start_suspended_and_replace_on_change(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    jobs = {r.name: r for r in plan.resources if r.type == TRAINJOB}
    assert set(jobs) == {"train-jobs-gpt2-124m", "train-jobs-bandwidth-check"}
    for r in jobs.values():
        assert r.inputs["spec"]["suspend"] is True
        assert r.options["deleteBeforeReplace"] is True and r.options["replaceOnChanges"] == ["spec"]
    (runtime_res,) = [r for r in plan.resources if r.type == RUNTIME]
    deps = runtime_res.dependencies
    assert any("kubeflow-trainer-release" in d for d in deps)
    assert any("service-accounts-training-trainer" in d for d in deps)  # the pods' service account
    assert any("namespaces-training" in d for d in deps)
    # never the GPU pool: a p5 launch short of capacity must not hold back the operator and runtime
    assert not any("pool-train-ng" in d for d in deps), deps


def test_the_bandwidth_check_is_held_in_a_team_queue(plan_stack) -> None:
    """The issue's case: resumed, the check ran in the trainer namespace outside Kueue, on GPUs Kueue counted
    as free. On a stack with teams it is the named team's job: in its namespace (Kueue manages every job
    there, so unsuspending it by hand starts nothing), with the team's priority, held without the queue
    label until labelled."""
    plan = plan_stack("prod-us-train")
    (check,) = [r.inputs for r in plan.resources if r.type == TRAINJOB and r.name.endswith("bandwidth-check")]
    team = plan.config["training"]["bandwidth_check"]["team"]
    assert check["metadata"]["namespace"] == f"team-{team}"
    labels = check["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/priority-class"] == plan.config["teams"][team]["default_priority"]
    assert "kueue.x-k8s.io/queue-name" not in labels
    assert check["spec"]["suspend"] is True


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes label selector semantics (matchLabels and the four matchExpressions operators)."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def test_the_trainer_pod_monitor_scrapes_training_pods_not_bandwidth_checks(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    (monitor,) = [m for m in _objects(plan, PODMONITOR) if m["metadata"]["name"] == "aiplat-trainer"]
    (runtime,) = _objects(plan, RUNTIME)
    jobs = {j["metadata"]["name"]: j for j in _objects(plan, TRAINJOB)}
    jobset = {"jobset.sigs.k8s.io/jobset-name": "gpt2-124m"}  # what JobSet adds to every pod
    training_pod = {**_pod_labels(runtime), **jobset}
    patch = jobs["bandwidth-check"]["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patched = patch["replicatedJobs"][0]["template"]["spec"]["template"]["metadata"]["labels"]
    bandwidth_pod = {**training_pod, **patched}
    assert _selects(monitor["spec"]["selector"], training_pod)
    assert not _selects(monitor["spec"]["selector"], bandwidth_pod)
    # the trainer's namespace and every namespace a TrainJob of the stack runs in (the teams')
    names = monitor["spec"]["namespaceSelector"]["matchNames"]
    assert names[0] == plan.config["storage"]["trainer"]["namespace"]
    assert {j["metadata"]["namespace"] for j in jobs.values()} <= set(names)
    # the port filter keeps every metrics port the runtime declares (one per GPU)
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    (keep,) = [r for r in endpoint["relabelings"] if r.get("action") == "keep"]
    ports = [p["containerPort"] for p in _pod(runtime)["containers"][0]["ports"]]
    assert len(ports) == 8 and all(re.fullmatch(keep["regex"], str(p)) for p in ports)


def _pod_labels(runtime: dict[str, Any]) -> dict[str, str]:
    rj = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]
    return rj["template"]["spec"]["template"]["metadata"]["labels"]


def test_trainer_chart_is_pinned(plan_stack) -> None:
    plan = plan_stack("prod-us-train")
    (release,) = [
        r for r in plan.resources if r.type == "kubernetes:helm.sh/v3:Release" and "trainer" in r.name
    ]
    assert release.inputs["chart"] == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
    assert release.inputs["version"] == "2.3.0"
    assert release.inputs["values"]["jobset"]["install"] is True
    assert release.inputs["values"]["runtimes"]["defaultEnabled"] is False
    # both controllers on the system pool, not on GPU nodes
    for affinity in (
        release.inputs["values"]["manager"]["affinity"],
        release.inputs["values"]["jobset"]["controller"]["affinity"],
    ):
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        assert terms[0]["matchExpressions"][0]["values"] == ["system"]


@pytest.mark.parametrize("stack", ["prod-hk-infer", "prod-sg-infer"])
def test_infer_stacks_build_no_images(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    assert not [r for r in plan.resources if r.type in (IMAGE, RUNTIME, TRAINJOB)]


def test_images_are_pushed_after_ecr_replication_is_configured(plan_stack) -> None:
    """Review finding F10: ECR replicates only images pushed after the replication configuration exists
    (and the creation template needs its role's policy to create the replica repository), so every push
    waits for both, and the configuration waits for the templates and that policy."""
    plan = plan_stack("prod-us-train")
    (replication,) = plan.by_type("aws:ecr/replicationConfiguration:ReplicationConfiguration")
    (role_policy,) = [
        r for r in plan.by_type("aws:iam/rolePolicy:RolePolicy") if r.name == "registry-template-role-policy"
    ]
    # the registry's own replica templates (a team's, for its replicas, come with its repositories, which
    # nothing of the stack pushes to: tests/infra/queueing/test_registry.py; the image copy area's applies on
    # push: tests/infra/mirror/test_rules.py)
    templates = [
        t
        for t in plan.by_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
        if "/teams/" not in t.inputs["prefix"] and t.inputs["appliedFors"] == ["REPLICATION"]
    ]
    assert templates and {t.urn for t in templates} | {role_policy.urn} <= set(replication.dependencies)
    images = plan.by_type(IMAGE)
    assert images
    for image in images:
        assert {replication.urn, role_policy.urn} <= set(image.dependencies), image.name
