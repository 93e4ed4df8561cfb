"""Priorities a team cannot take: a critical ``priorityClassName`` or an integer ``priority`` in a Pod, Job
or JobSet, Kueue's priority label outside the namespace's list (a ``system-node-critical`` TrainJob), and
a member's patch of a Workload's priority; and the namespace's quota of no critical pods."""

from __future__ import annotations

from typing import Any

import pytest

from infra.admission.documents import AdmissionRules, admission_objects
from infra.queueing.documents import critical_priority_quota
from infra.queueing.names import member_group, team_names
from tests.infra.admission.cel import refusals

RULES = AdmissionRules(
    account_id="123456789012",
    region="us-east-1",
    ecr_namespace="aiplat-prod",
    publisher_namespace="release-publisher",
    publisher_service_account="publisher",
    trainer_service_account="trainer",
)
POLICIES = {
    o["metadata"]["name"]: o for o in admission_objects(RULES) if o["kind"] == "ValidatingAdmissionPolicy"
}
BINDINGS = {
    o["spec"]["policyName"]: o["spec"]
    for o in admission_objects(RULES)
    if o["kind"] == "ValidatingAdmissionPolicyBinding"
}
# a team namespace that lists the classes 'research' and 'dev'
NAMESPACE = {
    "metadata": {
        "name": "team-research",
        "labels": {
            "aiplat.io/team": "research",
            "priority.aiplat.io/research": "true",
            "priority.aiplat.io/dev": "true",
        },
    }
}


def priorities(obj: dict[str, Any]) -> list[str]:
    return refusals(
        POLICIES["aiplat-team-priorities"],
        object=obj,
        request={"namespace": "team-research", "operation": "CREATE"},
        namespaceObject=NAMESPACE,
    )


def pod_spec(**fields: Any) -> dict[str, Any]:
    return {"containers": [{"name": "main", "image": "x"}], **fields}


def as_kind(kind: str, spec: dict[str, Any], labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "run", "labels": labels or {}}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    if kind == "Job":
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": meta,
            "spec": {"template": {"spec": spec}},
        }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "replicatedJobs": [
                {"name": "a", "template": {"spec": {"template": {"spec": pod_spec()}}}},
                {"name": "b", "template": {"spec": {"template": {"spec": spec}}}},
            ]
        },
    }


KINDS = ["Pod", "Job", "JobSet"]


@pytest.mark.parametrize("kind", KINDS)
def test_pods_without_a_class_or_with_an_allowed_one_pass(kind: str) -> None:
    assert priorities(as_kind(kind, pod_spec())) == []
    assert priorities(as_kind(kind, pod_spec(priorityClassName="research"))) == []
    assert priorities(as_kind(kind, pod_spec(), {"kueue.x-k8s.io/priority-class": "dev"})) == []


def test_a_pods_priority_from_the_priority_plugin_passes() -> None:
    # the Priority admission plugin has set spec.priority (0 without a class) before validation
    assert priorities(as_kind("Pod", pod_spec(priority=0))) == []
    assert priorities(as_kind("Pod", pod_spec(priorityClassName="dev", priority=100))) == []


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cls", ["system-node-critical", "system-cluster-critical", "production"])
def test_a_critical_or_unlisted_priority_class_is_refused(kind: str, cls: str) -> None:
    [message] = priorities(as_kind(kind, pod_spec(priorityClassName=cls)))
    assert message.startswith(
        "a team's pods name no priorityClassName but one of teams.<team>.priority_classes"
    )


@pytest.mark.parametrize("kind", ["Job", "JobSet"])
def test_an_integer_priority_in_a_template_is_refused(kind: str) -> None:
    [message] = priorities(as_kind(kind, pod_spec(priority=2000001000)))
    assert "and no integer priority" in message


def test_a_pods_nonzero_priority_without_a_class_is_refused() -> None:
    [message] = priorities(as_kind("Pod", pod_spec(priority=2000001000)))
    assert "and no integer priority" in message


def test_a_system_node_critical_trainjob_is_refused() -> None:
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "run", "labels": {"kueue.x-k8s.io/priority-class": "system-node-critical"}},
        "spec": {"runtimeRef": {"name": "aiplat-torch"}},
    }
    assert priorities(job) == [
        "the team may not use this WorkloadPriorityClass (kueue.x-k8s.io/priority-class); use one of "
        "teams.<team>.priority_classes (the namespace's priority.aiplat.io/ labels)"
    ]
    job["metadata"]["labels"]["kueue.x-k8s.io/priority-class"] = "research"
    assert priorities(job) == []


# -- Workloads ----------------------------------------------------------------------------------------------


def workload(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "trainjob-run-1a2b3", "namespace": "team-research"},
        "spec": {"queueName": "research", "podSets": [], **spec},
    }


def workload_update(old: dict[str, Any], new: dict[str, Any], *, groups: list[str], user: str) -> list[str]:
    return refusals(
        POLICIES["aiplat-workload-priority"],
        object=new,
        oldObject=old,
        request={
            "namespace": "team-research",
            "operation": "UPDATE",
            "userInfo": {"username": user, "groups": groups},
        },
    )


REF = {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "research"}
MEMBER = [member_group("research"), "system:authenticated"]


@pytest.mark.parametrize(
    "new",
    [
        workload(priority=2000001000, priorityClassRef=REF),
        workload(priority=500, priorityClassRef={**REF, "name": "production"}),
        workload(priorityClassRef=REF),  # the priority removed
    ],
)
def test_a_members_priority_patch_is_refused(new: dict[str, Any]) -> None:
    old = workload(priority=500, priorityClassRef=REF)
    [message] = workload_update(
        old, new, groups=MEMBER, user="arn:aws:sts::123456789012:assumed-role/r/alice"
    )
    assert message.startswith("a team's members may not change a Workload's priority")


def test_a_member_may_deactivate_and_kueue_may_set_the_priority() -> None:
    old = workload(priority=500, priorityClassRef=REF)
    assert (
        workload_update(
            old, workload(priority=500, priorityClassRef=REF, active=False), groups=MEMBER, user="alice"
        )
        == []
    )
    kueue = ["system:serviceaccounts", "system:serviceaccounts:kueue-system", "system:authenticated"]
    raised = workload(priority=900, priorityClassRef={**REF, "name": "production"})
    assert (
        workload_update(
            old, raised, groups=kueue, user="system:serviceaccount:kueue-system:kueue-controller-manager"
        )
        == []
    )


def test_the_priority_policies_are_bound_to_team_namespaces() -> None:
    for name in ("aiplat-team-priorities", "aiplat-workload-priority"):
        selector = BINDINGS[name]["matchResources"]["namespaceSelector"]
        assert {"key": "aiplat.io/team", "operator": "Exists"} in selector["matchExpressions"]
        assert BINDINGS[name]["validationActions"] == ["Deny"]
    [rule] = POLICIES["aiplat-workload-priority"]["spec"]["matchConstraints"]["resourceRules"]
    assert rule["resources"] == ["workloads"] and rule["operations"] == ["UPDATE"]


def test_the_team_namespace_has_no_room_for_critical_pods() -> None:
    quota = critical_priority_quota(team_names("research"))
    assert quota["metadata"]["namespace"] == "team-research"
    assert quota["spec"]["hard"] == {"pods": "0"}
    [expr] = quota["spec"]["scopeSelector"]["matchExpressions"]
    assert expr["scopeName"] == "PriorityClass" and expr["operator"] == "In"
    assert set(expr["values"]) == {"system-node-critical", "system-cluster-critical"}
