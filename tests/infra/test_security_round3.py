"""Issue 43 (security, round three), the Kubernetes and provenance side, on the plans of every shipped and
example stack: each finding has a test here that fails on the code before the fix, asserted on what the
real program registered."""

from __future__ import annotations

import json
from typing import Any

import pytest

from infra.plan.runner import Plan, RecordedResource
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _statements(r: RecordedResource, key: str = "policy") -> list[dict[str, Any]]:
    return json.loads(r.inputs[key])["Statement"]


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, list) else [v]


def _team_policies(plan: Plan) -> list[RecordedResource]:
    return [
        r
        for r in plan.by_type(ROLE_POLICY)
        if r.name.startswith("team-") and r.name.endswith("-role-policy") and "registry" not in r.name
    ]


# -- fairness: one job's slow start does not hold up every queue ------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_kueue_admits_without_waiting_for_other_jobs_pods(plans, stack: str) -> None:
    kueue = [r for r in plans[stack].by_type(RELEASE) if r.inputs["name"] == "kueue"]
    for r in kueue:
        config = json.loads(r.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"])
        wait = config["waitForPodsReady"]
        assert wait["blockAdmission"] is False
        # what still breaks a deadlock of half-started jobs: eviction at the timeout, requeued with backoff
        assert wait["timeout"] and wait["requeuingStrategy"]["timestamp"] == "Eviction"
    assert bool(kueue) == bool(plans[stack].config.get("teams"))


# -- no team lists another team's uploads ----------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_no_team_lists_the_shared_buckets_multipart_uploads(plans, stack: str) -> None:
    teams = _team_policies(plans[stack])
    for r in teams:
        for st in _statements(r):
            if st["Effect"] == "Allow":
                assert "s3:ListBucketMultipartUploads" not in _list(st["Action"]), r.name
    assert bool(teams) == bool(plans[stack].config.get("teams"))


# -- outputs are written once, never replaced or deleted ---------------------------------------------------


def _outputs_kept(statements: list[dict[str, Any]], checkpoints_arn: str) -> bool:
    """Some Deny refuses a PutObject under ``*/outputs/*`` without If-None-Match (but multipart's first steps)
    and some Deny every delete there."""
    where = f"{checkpoints_arn}/*/outputs/*"
    denies = [s for s in statements if s["Effect"] == "Deny" and where in _list(s["Resource"])]
    put = any(
        "s3:PutObject" in _list(s["Action"])
        and s["Condition"].get("Null") == {"s3:if-none-match": "true"}
        and s["Condition"].get("Bool") == {"s3:ObjectCreationOperation": "true"}
        for s in denies
    )
    delete = any({"s3:DeleteObject", "s3:DeleteObjectVersion"} <= set(_list(s["Action"])) for s in denies)
    return put and delete


def _written_bucket(statements: list[dict[str, Any]]) -> str:
    """The bucket of the role's first object write grant (the checkpoints bucket, for a team and the
    trainer)."""
    grant = next(s for s in statements if s["Effect"] == "Allow" and "s3:PutObject" in _list(s["Action"]))
    return _list(grant["Resource"])[0].split("/", 1)[0]


@pytest.mark.parametrize("stack", ALL)
def test_team_and_trainer_roles_write_outputs_once(plans, stack: str) -> None:
    plan = plans[stack]
    roles = [
        *_team_policies(plan),
        *(r for r in plan.by_type(ROLE_POLICY) if r.name == "pod-roles-trainer-policy"),
    ]
    # every train stack on S3 has the trainer's role (MinIO's pods hold MinIO keys instead)
    assert bool(roles) == (plan.config["role"] == "train" and plan.config["storage"]["backend"] == "s3")
    for r in roles:
        statements = _statements(r)
        assert _written_bucket(statements).endswith("checkpoints")
        assert _outputs_kept(statements, _written_bucket(statements)), r.name


@pytest.mark.parametrize("stack", ALL)
def test_the_checkpoints_bucket_keeps_outputs_for_every_caller(plans, stack: str) -> None:
    plan = plans[stack]
    if plan.config["role"] != "train" or plan.config["storage"]["backend"] != "s3":
        return
    bucket = plan.one("aws:s3/bucket:Bucket", "storage-checkpoints").inputs["bucket"]
    statements = _statements(plan.one("aws:s3/bucketPolicy:BucketPolicy", "storage-checkpoints-policy"))
    assert _outputs_kept(statements, f"arn:aws:s3:::{bucket}")
    assert all(s["Principal"] == "*" for s in statements if "/outputs/" in json.dumps(s["Resource"]))


# -- add-ons stay in their namespaces ----------------------------------------------------------------------

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"


def _addon_policy(plan: Plan) -> dict[str, Any]:
    return next(
        p.inputs for p in plan.by_type(VAP) if p.inputs["metadata"]["name"] == "aiplat-addon-namespaces"
    )


@pytest.mark.parametrize("stack", ALL)
def test_the_addons_service_accounts_are_confined(plans, stack: str) -> None:
    from infra.karpenter.documents import SERVICE_ACCOUNT as KARPENTER_SA
    from infra.monitoring.documents import KPS_RELEASE
    from infra.services.documents.lbc_iam import SERVICE_ACCOUNT as LBC_SA
    from infra.services.wire import CERT_MANAGER_NAMESPACE, SYSTEM_NAMESPACE
    from tests.infra.admission.cel import refusals

    plan = plans[stack]
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        return
    policy = _addon_policy(plan)
    [condition] = policy["spec"]["matchConditions"]
    monitoring = plan.config["cluster_services"]["monitoring_namespace"]
    releases = {r.inputs["name"]: r.inputs["namespace"] for r in plan.by_type(RELEASE)}
    assert (
        releases.get("kps", monitoring) == monitoring
        and releases.get("cert-manager") == CERT_MANAGER_NAMESPACE
    )
    users = [
        f"system:serviceaccount:{monitoring}:{KPS_RELEASE}-operator",
        f"system:serviceaccount:{CERT_MANAGER_NAMESPACE}:cert-manager",
        f"system:serviceaccount:{SYSTEM_NAMESPACE}:{KARPENTER_SA}",
        f"system:serviceaccount:{SYSTEM_NAMESPACE}:{LBC_SA}",
    ]
    for user in users:
        assert f"'{user}'" in condition["expression"], (stack, user)

    def writes(user: str, resource: str, namespace: str) -> list[str]:
        req = {"namespace": namespace, "operation": "CREATE", "resource": {"resource": resource}}
        return refusals(policy, object={}, request={**req, "userInfo": {"username": user}})

    # what the issue names: the operator rewriting the signing key's ConfigMap, cert-manager a Secret of the
    # inference namespace, any add-on a pod in kube-system but its own
    publisher = plan.config["storage"]["publisher"]["namespace"]
    inference = plan.config["storage"]["inference"]["namespace"]
    assert writes(users[0], "configmaps", publisher) != []
    assert writes(users[0], "statefulsets", monitoring) == []
    assert writes(users[1], "secrets", inference) != [] or plan.config["storage"]["backend"] == "minio"
    assert writes(users[0], "pods", "kube-system") != []
    # every Certificate of the plan is where cert-manager may write its Secret
    for cert in plan.by_type("kubernetes:cert-manager.io/v1:Certificate"):
        assert writes(users[1], "secrets", cert.inputs["metadata"]["namespace"]) == [], (stack, cert.name)


@pytest.mark.parametrize("stack", ALL)
def test_the_prometheus_operator_manages_its_own_namespace_only(plans, stack: str) -> None:
    plan = plans[stack]
    monitoring = plan.config["cluster_services"]["monitoring_namespace"]
    for r in plan.by_type(RELEASE):
        if r.inputs["name"] != "kps":
            continue
        operator = r.inputs["values"]["prometheusOperator"]
        # kube-prometheus-stack 88.5.3 values.yaml: the kubelet Service defaults to kube-system
        assert operator["kubeletService"]["namespace"] == monitoring
        assert r.inputs["values"]["kubelet"]["namespace"] == monitoring
        for key in (
            "prometheusInstanceNamespaces",
            "alertmanagerInstanceNamespaces",
            "thanosRulerInstanceNamespaces",
        ):
            assert operator[key] == [monitoring]


# -- the vLLM server holds no AWS identity ------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_only_the_fetch_container_gets_the_release_fetch_role(plans, stack: str) -> None:
    """The pod identity webhook (IRSA) injects the role's token into every container the pod's
    ``eks.amazonaws.com/skip-containers`` annotation does not name (aws/amazon-eks-pod-identity-webhook
    pkg/handler/handler.go); the server container is named, the fetch container is not."""
    deployments = [
        d
        for d in plans[stack].by_type("kubernetes:apps/v1:Deployment")
        if d.inputs["metadata"]["namespace"] == plans[stack].config["storage"]["inference"]["namespace"]
    ]
    for d in deployments:
        template = d.inputs["spec"]["template"]
        if d.inputs["metadata"]["name"] == "inference-router":
            # the model-name router: the namespace's default account, no token, no role to skip
            assert "serviceAccountName" not in template["spec"] and "annotations" not in template["metadata"]
            assert template["spec"]["automountServiceAccountToken"] is False
            continue
        skipped = set(template["metadata"]["annotations"]["eks.amazonaws.com/skip-containers"].split(","))
        spec = template["spec"]
        assert skipped == {c["name"] for c in spec["containers"]}
        assert not skipped & {c["name"] for c in spec["initContainers"]}
        assert spec["automountServiceAccountToken"] is False
        for c in spec["containers"]:
            assert not [e for e in c.get("env", []) if e["name"].startswith("AWS_")], c["name"]
    assert bool(deployments) == bool(plans[stack].config.get("inference"))


# -- kube-system under Pod Security --------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_kube_system_carries_pod_security_labels(plans, stack: str) -> None:
    plan = plans[stack]
    patches = [
        r.inputs["metadata"]
        for r in plan.by_type("kubernetes:core/v1:NamespacePatch")
        if r.inputs["metadata"]["name"] == "kube-system"
    ]
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        assert patches == []
        return
    [meta] = patches
    labels = meta["labels"]
    version = f"v{plan.config['cluster']['kubernetes_version']}"
    # privileged is the level aws-node, kube-proxy and the CSI node plugins pass; every such pod is audited
    assert labels["pod-security.kubernetes.io/enforce"] == "privileged"
    assert (
        labels["pod-security.kubernetes.io/audit"]
        == labels["pod-security.kubernetes.io/warn"]
        == "restricted"
    )
    assert {labels[f"pod-security.kubernetes.io/{m}-version"] for m in ("enforce", "audit", "warn")} == {
        version
    }


# -- the publisher reads the job and image from the job's run record ----------------------------------------


@pytest.mark.parametrize("stack", ALL)
def test_the_publisher_reads_the_run_records_of_the_owners_it_publishes(plans, stack: str) -> None:
    plan = plans[stack]
    found = [r for r in plan.by_type(ROLE_POLICY) if r.name == "pod-roles-publisher-policy"]
    if not found:
        return
    statements = _statements(found[0])
    read = next(s for s in statements if s.get("Sid") == "ReadOutputsAndRunRecords")
    resources = [r.split("/", 1)[1] for r in read["Resource"]]
    outputs = [r for r in resources if "/outputs/" in r]  # <owner>/outputs/*
    owners = sorted({o.split("/", 1)[0] for o in outputs})
    assert sorted(r for r in resources if "run-records" in r) == [f"{o}/*/run-records/*" for o in owners]
    assert read["Action"] == ["s3:GetObject", "s3:GetObjectVersion"]  # reads a version by its id
    listing = next(s for s in statements if s.get("Sid") == "ListOutputsAndRunRecords")
    listed = listing["Condition"]["StringLike"]["s3:prefix"]
    assert [p for p in listed if "run-records" in p] == [f"{o}/*/run-records/*" for o in owners]
