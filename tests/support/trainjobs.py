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


def plan_runtime(plan: Plan) -> dict[str, Any]:
    """The ClusterTrainingRuntime the plan declares, as a document."""
    [rt] = plan.by_type(RUNTIME)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", **rt.inputs}


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
