"""Every Kubernetes object of every stack and example plan validates offline against the Kubernetes schema
of the stack's cluster version (custom resources against typed models of their CRDs), and the validator
itself catches what the API server would refuse."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.io.stackfiles import list_stacks
from infra.plan.runner import Plan, RecordedResource, run_plan
from tests.conftest import STACKS
from tests.k8s.validate import CRD_MODELS, k8s_objects, kinds, validate_plan

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def example_plans() -> dict[str, Plan]:
    return {name: run_plan(name, stacks_dir=EXAMPLES) for name in list_stacks(EXAMPLES)}


@pytest.mark.parametrize("stack", STACKS)
def test_stack_objects_validate(plan_stack, stack: str) -> None:
    plan = plan_stack(stack)
    objects = k8s_objects(plan)
    assert len(objects) >= 15, [o.ref for o in objects]  # namespaces, policies, class, issuers, ...
    assert validate_plan(plan) == []


def test_example_objects_validate(example_plans) -> None:
    for name, plan in example_plans.items():
        # every example declares Kubernetes objects except the AWS-only one (kubernetes_access: skip)
        skip = plan.config["cluster_services"]["kubernetes_access"] == "skip"
        assert bool(k8s_objects(plan)) is not skip, name
        assert validate_plan(plan) == [], name


def test_custom_resources_are_checked_against_models(plan_stack) -> None:
    found = set().union(*(kinds(k8s_objects(plan_stack(s))) for s in STACKS))
    builtin_groups = ("apps/", "batch/", "policy/")
    custom = {
        k
        for k in found
        if "/" in k[0] and not k[0].endswith(".k8s.io/v1") and not k[0].startswith(builtin_groups)
    }
    assert custom == {
        ("monitoring.coreos.com/v1", "PodMonitor"),
        ("monitoring.coreos.com/v1", "PrometheusRule"),
        ("monitoring.coreos.com/v1", "ServiceMonitor"),
        ("cert-manager.io/v1", "Certificate"),
        ("cert-manager.io/v1", "ClusterIssuer"),
        ("karpenter.k8s.aws/v1", "EC2NodeClass"),
        ("karpenter.sh/v1", "NodePool"),
        ("trainer.kubeflow.org/v1alpha1", "ClusterTrainingRuntime"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("monitoring.coreos.com/v1", "PodMonitor"),
        ("keda.sh/v1alpha1", "ScaledObject"),
        ("kueue.x-k8s.io/v1beta2", "ResourceFlavor"),
        ("kueue.x-k8s.io/v1beta2", "Topology"),
        ("kueue.x-k8s.io/v1beta2", "Cohort"),
        ("kueue.x-k8s.io/v1beta2", "WorkloadPriorityClass"),
        ("kueue.x-k8s.io/v1beta2", "ClusterQueue"),
        ("kueue.x-k8s.io/v1beta2", "LocalQueue"),
    }
    assert custom <= set(CRD_MODELS)


def _plan(*resources: RecordedResource, version: str = "1.35") -> Plan:
    return Plan("t", "aiplat", "us-east-1", {"cluster": {"kubernetes_version": version}}, list(resources), {})


def _resource(type_: str, inputs: dict) -> RecordedResource:
    return RecordedResource(
        urn=f"urn:{type_}", type=type_, name="x", parent=None, provider=None, custom=True, inputs=inputs
    )


def test_validator_refuses_what_the_api_server_would() -> None:
    bad_policy = _resource(
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "p", "namespace": "n"},
            "spec": {"podSelector": {}, "egres": []},  # typo: unknown field
        },
    )
    bad_pool = _resource(
        "kubernetes:karpenter.sh/v1:NodePool",
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {
                "template": {
                    "spec": {
                        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "a"},
                        "requirements": [
                            {"key": "karpenter.k8s.aws/instance-gpus", "operator": "In", "values": ["1"]}
                        ],
                    }
                },
                "disruption": {"consolidationPolicy": "WhenIdle", "consolidateAfter": "10m"},
            },
        },
    )
    unknown = _resource(
        "kubernetes:monitoring.coreos.com/v1:Probe",
        {
            "apiVersion": "monitoring.coreos.com/v1",
            "kind": "Probe",
            "metadata": {"name": "m"},
            "spec": {},
        },
    )
    problems = validate_plan(_plan(bad_policy, bad_pool, unknown))
    text = "\n".join(problems)
    assert "NetworkPolicy n/p (Kubernetes 1.35): spec: Additional properties are not allowed ('egres'" in text
    assert 'label domain "karpenter.k8s.aws" is restricted (karpenter.k8s.aws/instance-gpus)' in text
    assert "disruption.consolidationPolicy" in text and "karpenter v1.14.1 CRDs" in text
    assert "Probe m: no Kubernetes 1.35 schema and no model in tests/k8s/crds" in text


def test_validator_uses_the_cluster_version() -> None:
    # ResourceClaim resource.k8s.io/v1 exists from Kubernetes 1.34; a 1.33 cluster does not know it
    claim = _resource(
        "kubernetes:resource.k8s.io/v1:ResourceClaim",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {}},
    )
    assert validate_plan(_plan(claim, version="1.35")) == []
    assert "no Kubernetes 1.33 schema" in "\n".join(validate_plan(_plan(claim, version="1.33")))
