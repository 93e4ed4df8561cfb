"""The admission policies' CEL expressions, evaluated with cel-python (RE2 regular expressions, as the API
server's CEL) on pods and TrainJobs they must let through and refuse."""

from __future__ import annotations

import re
from typing import Any

import celpy
import pytest

from infra.admission.documents import AdmissionRules, admission_objects

RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
    upstream_registries=("public.ecr.aws/neuron",),
    system_images=(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod-train/quay/jetstack/cert-manager-controller"
        "@sha256:" + "0123456789abcdef" * 4,
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer@sha256:" + "0123456789abcdef" * 4,
    ),
)
DIGEST = "@sha256:" + "0123456789abcdef" * 4
OURS = "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer" + DIGEST
POLICIES = {
    o["metadata"]["name"]: o for o in admission_objects(RULES) if o["kind"] == "ValidatingAdmissionPolicy"
}


def refused(policy: str, obj: dict[str, Any], namespace: str = "team-a") -> list[str]:
    """The messages of the validations of ``policy`` that refuse ``obj`` created in ``namespace``."""
    env = celpy.Environment()
    activation = {
        "object": celpy.json_to_cel(obj),
        "request": celpy.json_to_cel({"namespace": namespace, "operation": "CREATE"}),
    }
    out = []
    for v in POLICIES[policy]["spec"]["validations"]:
        result = env.program(env.compile(v["expression"])).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (v["expression"], result)  # never an error
        if not result:
            out.append(v["message"])
    return out


def pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"name": "main", "image": OURS}], **spec},
    }


# -- images -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "image",
    [
        OURS,
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/inference" + DIGEST,
        "public.ecr.aws/neuron/pytorch" + DIGEST,  # a configured upstream registry, by digest
    ],
)
def test_images_from_our_registry_by_digest_pass(image: str) -> None:
    p = pod(initContainers=[{"name": "fetch", "image": image}])
    p["spec"]["containers"][0]["image"] = image
    assert refused("aiplat-workload-images", p) == []


@pytest.mark.parametrize(
    "image",
    [
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer:latest",  # a tag
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-dev/trainer" + DIGEST,  # another ECR namespace
        "999999999999.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/trainer" + DIGEST,  # another account
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aiplat-prod/trainer" + DIGEST,  # another region
        "docker.io/library/python" + DIGEST,
        "123456789012xdkrxecr.us-east-1.amazonaws.com/aiplat-prod/trainer" + DIGEST,  # dots are literal
        OURS + "x",
    ],
)
@pytest.mark.parametrize("where", ["containers", "initContainers", "ephemeralContainers", "volumes"])
def test_other_images_are_refused_wherever_they_appear(image: str, where: str) -> None:
    p = pod()
    if where == "containers":
        p["spec"]["containers"].append({"name": "side", "image": image})
    elif where == "volumes":
        p["spec"]["volumes"] = [{"name": "model", "image": {"reference": image}}]
    else:
        p["spec"][where] = [{"name": "x", "image": image}]
    [message] = refused("aiplat-workload-images", p)
    assert (
        "comes from the stack's ECR repositories (123456789012.dkr.ecr.us-east-1.amazonaws.com/aiplat-prod/)"
        in (message)
    )


# -- the publisher's identity -----------------------------------------------------------------------------


def test_the_publisher_service_account_only_in_its_namespace() -> None:
    p = pod(serviceAccountName="publisher")
    assert refused("aiplat-publisher-identity", p, namespace="release-publisher") == []
    assert refused("aiplat-publisher-identity", p, namespace="training") == [
        "the service account 'publisher' (the release publisher's) runs pods only in namespace "
        "'release-publisher'"
    ]
    assert refused("aiplat-publisher-identity", pod(serviceAccountName="trainer"), namespace="training") == []
    assert refused("aiplat-publisher-identity", pod(), namespace="training") == []


# -- team pods --------------------------------------------------------------------------------------------


def test_a_plain_team_pod_passes() -> None:
    p = pod(
        securityContext={"runAsNonRoot": True},
        volumes=[{"name": "scratch", "emptyDir": {}}],
        hostNetwork=False,
    )
    p["spec"]["containers"][0]["securityContext"] = {"privileged": False, "allowPrivilegeEscalation": False}
    assert refused("aiplat-team-pods", p) == []


@pytest.mark.parametrize(
    "change",
    [
        lambda s: s["containers"][0].update(securityContext={"privileged": True}),
        lambda s: s.update(
            initContainers=[{"name": "i", "image": OURS, "securityContext": {"privileged": True}}]
        ),
        lambda s: s.update(
            ephemeralContainers=[{"name": "d", "image": OURS, "securityContext": {"privileged": True}}]
        ),
        lambda s: s.update(volumes=[{"name": "host", "hostPath": {"path": "/"}}]),
        lambda s: s.update(hostNetwork=True),
        lambda s: s.update(hostPID=True),
        lambda s: s.update(hostIPC=True),
    ],
    ids=[
        "privileged",
        "privileged-init",
        "privileged-debug",
        "hostPath",
        "hostNetwork",
        "hostPID",
        "hostIPC",
    ],
)
def test_host_access_in_a_team_pod_is_refused(change) -> None:
    p = pod()
    change(p["spec"])
    assert refused("aiplat-team-pods", p) == [
        "pods in team namespaces run no privileged container, host path, host network, host PID or host IPC; "
        "remove them from the pod spec"
    ]


# -- TrainJobs --------------------------------------------------------------------------------------------


def trainjob(pod_spec: dict[str, Any] | None = None, image: str | None = None) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "spec": {"runtimeRef": {"name": "aiplat-torch"}, "trainer": {"numNodes": 2}},
    }
    if image:
        job["spec"]["trainer"]["image"] = image
    if pod_spec is not None:
        job["spec"]["runtimePatches"] = [
            {
                "manager": "aiplat.io/cli",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {"name": "node", "template": {"spec": {"template": {"spec": pod_spec}}}}
                            ]
                        }
                    }
                },
            }
        ]
    return job


def test_a_trainjob_within_the_rules_passes() -> None:
    assert refused("aiplat-trainjobs", trainjob()) == []
    assert refused("aiplat-trainjobs", trainjob(image=OURS)) == []
    ok = {
        "serviceAccountName": "trainer",
        "nodeSelector": {"a": "b"},
        "containers": [{"name": "node", "env": []}],
    }
    assert refused("aiplat-trainjobs", trainjob(ok)) == []
    # patches that carry only metadata (the labels the CLI sets) pass too
    job = trainjob({})
    del job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0][
        "template"
    ]["spec"]
    assert refused("aiplat-trainjobs", job) == []


@pytest.mark.parametrize(
    ("job", "fragment"),
    [
        (trainjob(image="docker.io/evil/trainer:1"), "spec.trainer.image comes from the stack's ECR"),
        (
            trainjob({"serviceAccountName": "publisher"}),
            "runtimePatches may not change the pods' service account",
        ),
        (
            trainjob({"containers": [{"name": "node", "securityContext": {"privileged": True}}]}),
            "runtimePatches may not add privileged containers",
        ),
        (
            trainjob({"volumes": [{"name": "h", "hostPath": {"path": "/var/run"}}]}),
            "runtimePatches may not add privileged containers, host paths",
        ),
        (
            trainjob({"volumes": [{"name": "m", "image": {"reference": "docker.io/x/y:1"}}]}),
            "images from outside the stack's ECR repositories",
        ),
    ],
)
def test_a_trainjob_outside_the_rules_is_refused(job: dict[str, Any], fragment: str) -> None:
    [message] = refused("aiplat-trainjobs", job)
    assert fragment in message


def test_bindings_select_workload_namespaces_and_deny() -> None:
    objects = admission_objects(RULES)
    bindings = {
        o["metadata"]["name"]: o["spec"] for o in objects if o["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    assert set(bindings) == set(POLICIES)
    for name, spec in bindings.items():
        assert spec["policyName"] == name and spec["validationActions"] == ["Deny"]
        if name == "aiplat-system-images":  # the other namespaces (test_the_system_binding_...)
            continue
        assert spec["matchResources"]["namespaceSelector"]["matchLabels"] == {"aiplat.io/workloads": "true"}
    assert bindings["aiplat-team-pods"]["matchResources"]["namespaceSelector"]["matchExpressions"] == [
        {"key": "aiplat.io/team", "operator": "Exists"}
    ]
    for p in POLICIES.values():
        assert p["spec"]["failurePolicy"] == "Fail"


# The fields of a TrainJob's pod spec patch and of its container patch: Kubeflow Trainer v2.3.0
# manifests/base/crds/trainer.kubeflow.org_trainjobs.yaml, spec.runtimePatches[].trainingRuntimeSpec.template
# .spec.replicatedJobs[].template.spec.template.spec (an excerpt of the names, read at tag v2.3.0).
PATCH_POD_FIELDS = {
    "affinity",
    "containers",
    "imagePullSecrets",
    "initContainers",
    "nodeSelector",
    "schedulingGates",
    "securityContext",
    "serviceAccountName",
    "terminationGracePeriodSeconds",
    "tolerations",
    "volumes",
}
PATCH_CONTAINER_FIELDS = {"env", "name", "securityContext", "volumeMounts"}


def test_trainjob_expressions_name_only_fields_the_crd_has() -> None:
    """The API server type-checks CEL against the CRD schema: a field the patch type lacks would break the
    policy (and, failing closed, every TrainJob)."""
    spec = "j.template.spec.template.spec"
    for v in POLICIES["aiplat-trainjobs"]["spec"]["validations"]:
        used = set(re.findall(re.escape(spec) + r"\.(\w+)", v["expression"]))
        assert used <= PATCH_POD_FIELDS, used - PATCH_POD_FIELDS
        # container fields read through the patches' containers (c.<field>) exist in the container patch
        if "containers" in used:
            assert set(re.findall(r"\bc\.(\w+)", v["expression"])) <= PATCH_CONTAINER_FIELDS


# -- team repositories ------------------------------------------------------------------------------------

TEAM_RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
    team_namespaces={"team-research": "research", "vision-ns": "vision"},
)
TEAM_POLICIES = {
    o["metadata"]["name"]: o
    for o in admission_objects(TEAM_RULES)
    if o["kind"] == "ValidatingAdmissionPolicy"
}
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
RESEARCH_IMAGE = f"{REGISTRY}/aiplat-prod/teams/research/byo-llama" + DIGEST
VISION_IMAGE = f"{REGISTRY}/aiplat-prod/teams/vision/detector" + DIGEST
TEAM_MESSAGE = (
    f"an image of a team's repositories ({REGISTRY}/aiplat-prod/teams/<team>/) runs only in that team's "
    "namespace; push it to the repositories of the team whose namespace runs it"
)


def team_refused(policy: str, obj: dict[str, Any], namespace: str) -> list[str]:
    env = celpy.Environment()
    activation = {
        "object": celpy.json_to_cel(obj),
        "request": celpy.json_to_cel({"namespace": namespace, "operation": "CREATE"}),
    }
    out = []
    for v in TEAM_POLICIES[policy]["spec"]["validations"]:
        result = env.program(env.compile(v["expression"])).evaluate(activation)
        assert isinstance(result, celpy.celtypes.BoolType), (v["expression"], result)
        if not result:
            out.append(v["message"])
    return out


@pytest.mark.parametrize(
    ("image", "namespace"),
    [
        (RESEARCH_IMAGE, "team-research"),  # the team's own, in its namespace
        (VISION_IMAGE, "vision-ns"),  # a team whose namespace the config names
        (OURS, "team-research"),  # the platform's, in a team namespace
        (OURS, "training"),  # the platform's, elsewhere
    ],
)
def test_a_teams_images_run_in_its_namespace(image: str, namespace: str) -> None:
    p = pod()
    p["spec"]["containers"][0]["image"] = image
    assert team_refused("aiplat-workload-images", p, namespace) == []
    assert team_refused("aiplat-trainjobs", trainjob(image=image), namespace) == []


@pytest.mark.parametrize(
    ("image", "namespace"),
    [
        (VISION_IMAGE, "team-research"),  # another team's repository
        (RESEARCH_IMAGE, "vision-ns"),
        (RESEARCH_IMAGE, "training"),  # the platform's trainer namespace runs no team's image
        (RESEARCH_IMAGE, "release-publisher"),
        (f"{REGISTRY}/aiplat-prod/teams/nobody/x" + DIGEST, "team-research"),  # a team the stack lacks
    ],
)
@pytest.mark.parametrize("where", ["containers", "initContainers", "volumes"])
def test_a_teams_images_are_refused_elsewhere(image: str, namespace: str, where: str) -> None:
    p = pod()
    if where == "containers":
        p["spec"]["containers"][0]["image"] = image
    elif where == "volumes":
        p["spec"]["volumes"] = [{"name": "model", "image": {"reference": image}}]
    else:
        p["spec"][where] = [{"name": "x", "image": image}]
    # in the stack's registry by digest (the first rule holds), but not this namespace's team
    assert team_refused("aiplat-workload-images", p, namespace) == [TEAM_MESSAGE]


@pytest.mark.parametrize(
    ("image", "namespace", "messages"),
    [
        (VISION_IMAGE, "team-research", ["spec.trainer.image: " + TEAM_MESSAGE]),
        (
            f"{REGISTRY}/aiplat-prod/teams/research/byo-llama:v1",  # the team's own, by tag
            "team-research",
            ["spec.trainer.image comes from the stack's ECR repositories by digest"],
        ),
    ],
)
def test_a_trainjob_with_another_teams_image_or_a_tag_is_refused(
    image: str, namespace: str, messages: list[str]
) -> None:
    assert team_refused("aiplat-trainjobs", trainjob(image=image), namespace) == messages
    # so are the pods it would start
    p = pod()
    p["spec"]["containers"][0]["image"] = image
    assert team_refused("aiplat-workload-images", p, namespace) != []


def test_a_patched_image_volume_of_another_team_is_refused() -> None:
    job = trainjob({"volumes": [{"name": "m", "image": {"reference": VISION_IMAGE}}]})
    [message] = team_refused("aiplat-trainjobs", job, "team-research")
    assert "images from outside the stack's ECR repositories" in message
    ok = trainjob({"volumes": [{"name": "m", "image": {"reference": RESEARCH_IMAGE}}]})
    assert team_refused("aiplat-trainjobs", ok, "team-research") == []


# -- the system namespaces --------------------------------------------------------------------------------

REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
CACHED = f"{REGISTRY}/aiplat-prod-train/quay/jetstack/cert-manager-controller"


@pytest.mark.parametrize("image", [CACHED + DIGEST, CACHED + ":v1.21.1" + DIGEST, OURS])
def test_system_pods_from_our_registry_by_digest_pass(image: str) -> None:
    p = pod(initContainers=[{"name": "init", "image": image}])
    p["spec"]["containers"][0]["image"] = image
    assert refused("aiplat-system-images", p, namespace="cert-manager") == []


@pytest.mark.parametrize(
    "image",
    [
        CACHED + ":v1.21.1",  # a tag
        "quay.io/jetstack/cert-manager-controller" + DIGEST,  # a public registry, even by digest
        "quay.io/jetstack/cert-manager-controller:v1.21.1",
        "602401143452.dkr.ecr.us-east-1.amazonaws.com/eks/aws-efa-k8s-device-plugin" + DIGEST,  # EKS's
        "123456789012.dkr.ecr.eu-west-1.amazonaws.com/aiplat-prod-train/x" + DIGEST,  # another region
    ],
)
@pytest.mark.parametrize("where", ["containers", "initContainers", "ephemeralContainers", "volumes"])
def test_system_pods_refuse_a_tag_and_a_public_registry(image: str, where: str) -> None:
    p = pod()
    if where == "containers":
        p["spec"]["containers"].append({"name": "side", "image": image})
    elif where == "volumes":
        p["spec"]["volumes"] = [{"name": "data", "image": {"reference": image}}]
    else:
        p["spec"][where] = [{"name": "x", "image": image}]
    [message] = refused("aiplat-system-images", p, namespace="monitoring")
    assert f"registry ({REGISTRY}/) with its recorded digest" in message


def test_the_system_binding_takes_every_namespace_but_workloads_and_kube_system() -> None:
    [b] = [
        o
        for o in admission_objects(RULES)
        if o["kind"] == "ValidatingAdmissionPolicyBinding"
        and o["spec"]["policyName"] == "aiplat-system-images"
    ]
    assert b["spec"]["validationActions"] == ["Deny"]
    exprs = b["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]

    def selects(labels: dict[str, str]) -> bool:
        return all(labels.get(e["key"]) not in e["values"] for e in exprs)  # every operator is NotIn

    assert {e["operator"] for e in exprs} == {"NotIn"}
    assert selects({"kubernetes.io/metadata.name": "cert-manager"})
    assert selects({"kubernetes.io/metadata.name": "node-exporters"})
    assert not selects({"kubernetes.io/metadata.name": "kube-system"})
    assert not selects({"kubernetes.io/metadata.name": "training", "aiplat.io/workloads": "true"})
