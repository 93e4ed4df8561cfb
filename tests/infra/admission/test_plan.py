"""The admission policies on every plan: schema-valid (tests/infra/test_k8s_objects.py validates them with
the rest), bound to every workload namespace, and letting through the pods the plan itself declares."""

from __future__ import annotations

from typing import Any

import celpy
import pytest

from infra.plan.runner import Plan
from tests.conftest import EXAMPLES, STACKS

ALL = [f"stacks/{s}" for s in STACKS] + [f"examples/{s}" for s in EXAMPLES]
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
SYSTEM_WIDE = ("aiplat-system-images", "aiplat-kube-system-images", "aiplat-addon-namespaces")


@pytest.fixture(scope="module")
def plans(plan_stack, plan_example) -> dict[str, Plan]:
    out = {f"stacks/{s}": plan_stack(s) for s in STACKS}
    out.update({f"examples/{s}": plan_example(s) for s in EXAMPLES})
    return out


def _evaluate(policy: dict[str, Any], obj: dict[str, Any], namespace: str) -> list[str]:
    env = celpy.Environment()
    act = {"object": celpy.json_to_cel(obj), "request": celpy.json_to_cel({"namespace": namespace})}
    return [
        v["message"]
        for v in policy["spec"]["validations"]
        if not env.program(env.compile(v["expression"])).evaluate(act)
    ]


def _pods(plan: Plan) -> list[tuple[str, dict[str, Any]]]:
    """(namespace, pod) for every pod template of the plan's workloads: the training runtime's replicated
    jobs (their pods run in the TrainJob's namespace) and the Deployments of workload namespaces."""
    out = []
    trainer_ns = plan.config["storage"]["trainer"]["namespace"]
    for rt in plan.by_type("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"):
        for job in rt.inputs["spec"]["template"]["spec"]["replicatedJobs"]:
            out.append((trainer_ns, {"spec": job["template"]["spec"]["template"]["spec"]}))
    for d in plan.by_type("kubernetes:apps/v1:Deployment"):
        out.append((d.inputs["metadata"]["namespace"], {"spec": d.inputs["spec"]["template"]["spec"]}))
    return out


@pytest.mark.parametrize("stack", ALL)
def test_every_workload_namespace_is_bound_and_its_pods_pass(plans, stack: str) -> None:
    plan = plans[stack]
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        assert not plan.by_type(VAP)
        return
    policies = {p.inputs["metadata"]["name"]: p.inputs for p in plan.by_type(VAP)}
    bindings = [b.inputs["spec"] for b in plan.by_type(BINDING)]
    assert (
        {b["policyName"] for b in bindings}
        == set(policies)
        == {
            "aiplat-workload-images",
            "aiplat-publisher-identity",
            "aiplat-publisher-nodes",
            "aiplat-team-pods",
            "aiplat-trainjobs",
            "aiplat-team-priorities",
            "aiplat-workload-priority",
            "aiplat-system-images",
            "aiplat-kube-system-images",  # every shipped and example region has an EKS add-on registry
            "aiplat-addon-namespaces",  # every namespace, for the add-ons' service accounts
        }
    )
    workload = {
        n.inputs["metadata"]["name"]: n.inputs["metadata"]["labels"]
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if n.inputs["metadata"]["labels"].get("aiplat.io/workloads") == "true"
    }
    expected = {plan.config["storage"]["inference"]["namespace"]}
    if plan.config["role"] == "train":
        expected |= {
            plan.config["storage"]["trainer"]["namespace"],
            plan.config["storage"]["publisher"]["namespace"],
        }
    assert expected <= set(workload)
    for labels in workload.values():
        for b in bindings:
            if b["policyName"] in SYSTEM_WIDE:  # the others' (test_system_images.py, test_addons.py)'
                continue
            selector = b["matchResources"]["namespaceSelector"]
            assert selector["matchLabels"].items() <= labels.items()
    # what the plan runs in those namespaces passes every policy bound there
    checked = 0
    for namespace, pod in _pods(plan):
        if namespace not in workload:
            continue
        for name in ("aiplat-workload-images", "aiplat-publisher-identity", "aiplat-publisher-nodes"):
            assert _evaluate(policies[name], pod, namespace) == [], (stack, namespace, name)
        checked += 1
    # the trainer's pods, one Deployment per served model and the model-name router (infra/inference/router)
    models = (plan.config.get("inference") or {}).get("models") or {}
    trainer = plan.config["role"] == "train" and plan.config.get("training") is not None
    assert checked == trainer + len(models) + bool(models)


@pytest.mark.parametrize("stack", ALL)
def test_every_team_namespace_has_a_quota_of_no_critical_pods(plans, stack: str) -> None:
    plan = plans[stack]
    teams = {
        n.inputs["metadata"]["name"]
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if "aiplat.io/team" in n.inputs["metadata"]["labels"]
    }
    quotas = {
        q.inputs["metadata"]["namespace"]: q.inputs["spec"]
        for q in plan.by_type("kubernetes:core/v1:ResourceQuota")
        if q.inputs["spec"].get("scopeSelector")
    }
    assert set(quotas) == teams
    for spec in quotas.values():
        assert spec["hard"] == {"pods": "0"}
        [expr] = spec["scopeSelector"]["matchExpressions"]
        assert (expr["scopeName"], expr["operator"]) == ("PriorityClass", "In")
        assert {"system-node-critical", "system-cluster-critical"} <= set(expr["values"])


def _system_images(plan: Plan) -> list[tuple[str, str, str]]:
    """(namespace, where, image) of every image the plan runs outside the workload namespaces: the charts'
    recorded images as their values name them, and the typed pod templates'."""
    from infra.mirror.documents import chart_pins
    from tests.infra.mirror.test_plan_images import _at, _pod_images, image_of

    workload = {
        n.inputs["metadata"]["name"]
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if n.inputs["metadata"]["labels"].get("aiplat.io/workloads") == "true"
    }
    out = []
    for r in plan.by_type("kubernetes:helm.sh/v3:Release"):
        chart = str(r.inputs["chart"]).rsplit("/", 1)[-1]
        for pin in chart_pins(chart, str(r.inputs["version"])):
            ref = image_of(_at(r.inputs.get("values") or {}, pin.values)) if pin.values else None
            if ref is not None and pin.digest is not None:
                out.append((r.inputs["namespace"], f"{chart}:{pin.values}", ref))
    for r in plan.resources:
        ns = (r.inputs.get("metadata") or {}).get("namespace") if isinstance(r.inputs, dict) else None
        if ns is None or ns in workload or r.type == "kubernetes:helm.sh/v3:Release":
            continue
        out += [(ns, f"{r.name}:{path}", image) for path, image in _pod_images(r.inputs.get("spec"))]
    return out


@pytest.mark.parametrize("stack", ALL)
def test_the_system_namespaces_admit_the_images_the_plan_runs_there(plans, stack: str) -> None:
    plan = plans[stack]
    if plan.config["cluster_services"]["kubernetes_access"] == "skip":
        return
    policies = {p.inputs["metadata"]["name"]: p.inputs for p in plan.by_type(VAP)}
    checked = 0
    for namespace, where, image in _system_images(plan):
        name = "aiplat-kube-system-images" if namespace == "kube-system" else "aiplat-system-images"
        pod = {"spec": {"containers": [{"name": "c", "image": image}]}}
        assert _evaluate(policies[name], pod, namespace) == [], (stack, where, image)
        checked += 1
    assert checked
    # and refuse another image of the same cached registries, and a recorded image at another digest
    [image] = {i for ns, _, i in _system_images(plan) if "cert-manager-controller" in i}
    other = image.rsplit("@", 1)[0] + "@sha256:" + "f" * 64
    for name, ns in (("aiplat-system-images", "cert-manager"), ("aiplat-kube-system-images", "kube-system")):
        assert _evaluate(policies[name], {"spec": {"containers": [{"name": "c", "image": other}]}}, ns) != []
