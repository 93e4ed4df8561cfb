"""What the cluster would make of a TrainJob, offline: the pod the Trainer builds from it on a runtime (the
runtime's pod template with the TrainJob's image, command, args and env, Trainer v2.3.0
pkg/runtime/framework/plugins/jobset/builder.go, and its runtime patches' pod spec fields), and the
messages of the admission policies of a plan that refuse an object (their CEL evaluated with cel-python,
as tests/infra/admission does)."""

from __future__ import annotations

import copy
from typing import Any

import celpy

from infra.plan.runner import Plan

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
NODE = "node"


def _whole(value: Any) -> Any:
    """Numbers as the API server returns them: the plan records every number as a float (protobuf)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def plan_runtime(plan: Plan) -> dict[str, Any]:
    """The ClusterTrainingRuntime the plan declares, as a document."""
    [rt] = plan.by_type(RUNTIME)
    return _whole(
        {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", **rt.inputs}
    )


def effective_pod(runtime: dict[str, Any], trainjob: dict[str, Any]) -> dict[str, Any]:
    """The trainer pod ``trainjob`` gets on ``runtime`` (a Pod object in the TrainJob's namespace)."""
    [rj] = [
        r
        for r in runtime["spec"]["template"]["spec"]["replicatedJobs"]
        if r["template"]["metadata"]["labels"].get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"
    ]
    template = copy.deepcopy(rj["template"]["spec"]["template"])
    spec = template["spec"]
    trainer = trainjob["spec"].get("trainer", {})
    for c in spec["containers"]:
        if c["name"] != NODE:
            continue
        for key in ("image", "command", "args"):
            if trainer.get(key) is not None:
                c[key] = list(trainer[key]) if key != "image" else trainer[key]
        env = {e["name"]: e for e in c.get("env", [])}
        for e in trainer.get("env", []):  # upserted by name: replaced in place, new ones appended
            env[e["name"]] = e
        c["env"] = list(env.values())
    for patch in trainjob["spec"].get("runtimePatches", []):
        for job in patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]:
            if job["name"] != rj["name"]:
                continue
            pod = job.get("template", {}).get("spec", {}).get("template", {})
            for k, v in pod.get("metadata", {}).get("labels", {}).items():
                template.setdefault("metadata", {}).setdefault("labels", {})[k] = v
            spec.update({k: v for k, v in pod.get("spec", {}).items() if not isinstance(v, list | dict)})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{trainjob['metadata']['name']}-node-0-0-abcde",
            "namespace": trainjob["metadata"]["namespace"],
            "labels": template.get("metadata", {}).get("labels", {}),
        },
        "spec": spec,
    }


def admission_refusals(plan: Plan, obj: dict[str, Any], namespace: str, *policies: str) -> list[str]:
    """The messages of the plan's ``policies`` that refuse creating ``obj`` in ``namespace``."""
    declared = {p.inputs["metadata"]["name"]: p.inputs for p in plan.by_type(VAP)}
    env = celpy.Environment()
    act = {
        "object": celpy.json_to_cel(obj),
        "request": celpy.json_to_cel({"namespace": namespace, "operation": "CREATE"}),
    }
    out = []
    for name in policies:
        for v in declared[name]["spec"]["validations"]:
            result = env.program(env.compile(v["expression"])).evaluate(act)
            assert isinstance(result, celpy.celtypes.BoolType), (name, v["expression"], result)
            if not result:
                out.append(f"{name}: {v['message']}")
    return out


KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def quantity(q: str | int | float) -> float:
    """A Kubernetes quantity as a number (the forms the plan and the runtime use: plain, m, Ki..Ti)."""
    text = str(q)
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    if text[-2:] in _BINARY:
        return float(text[:-2]) * _BINARY[text[-2:]]
    return float(text)


def kueue_problems(plan: Plan, trainjob: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """Why the plan's Kueue would not admit ``trainjob`` (whose trainer pod is ``pod``), empty when it can:
    its namespace is one Kueue manages (the team label, ``managedJobsNamespaceSelector``), its queue label
    names a LocalQueue of that namespace whose ClusterQueue selects it, its priority label a
    WorkloadPriorityClass the plan declares, one of the ClusterQueue's flavors matches the pods' node
    selection, and every resource the pods request is covered and fits the flavor's nominal quota plus its
    borrowing limit, nodes times the pod's request (Kueue v0.19.2 concepts: cluster_queue, local_queue)."""
    namespace = trainjob["metadata"]["namespace"]
    labels = trainjob["metadata"].get("labels", {})
    objects = {
        kind: [r.inputs for r in plan.by_type(f"{KUEUE}:{kind}")]
        for kind in ("LocalQueue", "ClusterQueue", "ResourceFlavor", "WorkloadPriorityClass")
    }
    problems: list[str] = []
    ns = [
        n.inputs
        for n in plan.by_type("kubernetes:core/v1:Namespace")
        if n.inputs["metadata"]["name"] == namespace
    ]
    if not ns or "aiplat.io/team" not in ns[0]["metadata"].get("labels", {}):
        problems.append(f"namespace {namespace} is not a team namespace Kueue manages")
    queue = labels.get(QUEUE_LABEL)
    lqs = [
        q
        for q in objects["LocalQueue"]
        if q["metadata"]["name"] == queue and q["metadata"]["namespace"] == namespace
    ]
    if not lqs:
        return [*problems, f"no LocalQueue {queue!r} in {namespace}"]
    [cq] = [c for c in objects["ClusterQueue"] if c["metadata"]["name"] == lqs[0]["spec"]["clusterQueue"]]
    if cq["spec"]["namespaceSelector"]["matchLabels"].get("kubernetes.io/metadata.name") != namespace:
        problems.append(f"ClusterQueue {cq['metadata']['name']} does not select {namespace}")
    priority = labels.get(PRIORITY_LABEL)
    if priority is not None and priority not in {
        p["metadata"]["name"] for p in objects["WorkloadPriorityClass"]
    }:
        problems.append(f"no WorkloadPriorityClass {priority!r}")
    wanted_pools = {
        v
        for term in pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ]
        for e in term["matchExpressions"]
        if e["key"] == "aiplat.io/pool"
        for v in e["values"]
    }
    flavors = {f["metadata"]["name"]: f for f in objects["ResourceFlavor"]}
    [group] = cq["spec"]["resourceGroups"]
    fitting = [
        f
        for f in group["flavors"]
        if flavors[f["name"]]["spec"]["nodeLabels"].get("aiplat.io/pool") in wanted_pools
    ]
    if not fitting:
        return [*problems, f"no flavor of {cq['metadata']['name']} is on pools {sorted(wanted_pools)}"]
    nodes = trainjob["spec"]["trainer"].get("numNodes", 1)
    [node] = [c for c in pod["spec"]["containers"] if c["name"] == NODE]
    requests = node["resources"]["requests"]
    for name in sorted(set(requests) - set(group["coveredResources"])):
        problems.append(f"{name} is not covered by {cq['metadata']['name']}")
    limits = {r["name"]: r for r in fitting[0]["resources"]}
    flavor = fitting[0]["name"]
    for name, value in requests.items():
        if name not in limits:
            continue
        if "borrowingLimit" in limits[name]:
            borrow = quantity(limits[name]["borrowingLimit"])
        else:  # no limit: what the cohort's other queues hold on the flavor
            borrow = sum(
                quantity(r.get("lendingLimit", r["nominalQuota"]))
                for other in objects["ClusterQueue"]
                if other is not cq and other["spec"].get("cohortName") == cq["spec"].get("cohortName")
                for f in other["spec"]["resourceGroups"][0]["flavors"]
                if f["name"] == flavor
                for r in f["resources"]
                if r["name"] == name
            )
        most = quantity(limits[name]["nominalQuota"]) + borrow
        if nodes * quantity(value) > most:
            problems.append(
                f"{nodes} x {name} {value} is more than {cq['metadata']['name']} can get ({most:g})"
            )
    return problems
